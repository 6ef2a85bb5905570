"""The fault suite's driver policy and the fault it injects into every job's device."""

from __future__ import annotations

POLICY = """
# The fault suite's policy: the default pipeline with second-sized waits and timeouts, so an
# attempt lost with a SIGKILLed worker is retried within seconds, and more attempts for steps
# that make many calls per attempt (a 30% API error rate fails most of their attempts). Node correlation is off: the
# suite's jobs share nodes, and each incident must run its own device-level pipeline. It is laid over
# the embedded policy, so what it turns off it says: no fleet guard (the suite fails many devices of a
# small cluster on purpose), no repeat-offender rule (scenarios fail the same devices again).
guard: {enabled: false}
drivers:
  default:
    repeat_offenders: {incidents: 0}
    detection: {node_correlation: {devices: 64, window_s: 1}}
    node_quarantine: {enabled: false}
    steps:
      discover:   {start_to_close_s: 10, retry: {initial_interval_s: 0.5, max_interval_s: 2, max_attempts: 10}}
      checkpoint: {start_to_close_s: 60, heartbeat_s: 3, retry: {initial_interval_s: 0.5, max_attempts: 5}}
      taint:      {start_to_close_s: 10, retry: {initial_interval_s: 0.5, max_interval_s: 2, max_attempts: 10}}
      recover:    {start_to_close_s: 120, heartbeat_s: 3, retry: {initial_interval_s: 0.5, max_attempts: 10}}
      ticket:     {start_to_close_s: 10, retry: {initial_interval_s: 0.5, max_interval_s: 2, max_attempts: 10}}
      close:      {start_to_close_s: 10, retry: {initial_interval_s: 0.5, max_interval_s: 2, max_attempts: 10}}
    checkpoint: {timeout_s: 20, poll_s: 0.3}
    taint: {transient: NoSchedule, permanent: NoExecute}
    recovery:
      transient:
        - {action: same_node, attempts: 1, timeout_s: 60}
        - {action: any_node, attempts: 1, timeout_s: 60}
      permanent:
        - {action: same_node, attempts: 1, timeout_s: 60}
        - {action: any_node, attempts: 1, timeout_s: 60}
      verify_poll_s: 0.3
      eviction: {retry_s: 1, max_wait_s: 30}
    close: {heal_wait_s: 2, anti_flap_s: 1, poll_s: 0.5}
    ticket: {url: "${PODMEDIC_TICKET_URL}", poll_s: 1, wait_resolution_s: 180, verify_s: 30}
  gpu.nvidia.com:
    detection: {corroborate_s: 15}   # as shipped: pod status names no XID, the node agent does
    # The embedded entry's own values would outrank the default above (podmedic policy validate says so).
    checkpoint: {timeout_s: 20}
    steps: {recover: {start_to_close_s: 120, heartbeat_s: 3}}
    classification:
      codes:
        permanent: [46, 48, 54, 62, 63, 64, 74, 79, 95, 110, 119, 120, 136, 140, 142, 143, 151, 155, 156, 158]
        container_code: [13, 31, 43, 45, 68]
        ignore: [109]
"""
# XID 94 (contained ECC error): transient, not cleared by moving the pod, so one incident runs
# every stage: checkpoint, taint, reschedule, ticket (still unhealthy), vendor fix, untaint.
FAULT = {"health": "Unhealthy", "reason": "XidError", "code": 94, "message": "XID 94: contained ECC error"}
