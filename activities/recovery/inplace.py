"""In-place restart: the pod keeps its UID and device allocation; its container(s) restart.

Three mechanisms, chosen per driver (``recovery.in_place.mechanism``):

- ``exit_code``: annotate ``podmedic.io/restart-request``; the workload exits with its
  ``podmedic.io/restart-exit-code``, which a ``restartPolicyRules`` ``Restart`` rule turns
  into an in-place container restart (KEP-5307).
- ``restart_all_containers``: the same request, but the matching rule's action is
  ``RestartAllContainers`` (KEP-5532): every container of the pod restarts in place.
- ``exec_signal``: exec ``kill -s <SIG> 1`` (configurable) through pods/exec; PID 1 dies of
  the signal (exit code 128+N) and the container's rules or restart policy restart it.

Before acting, the pod's spec is read to make sure the exit really restarts in place: a pod
whose rules would let it fail is refused with the reason (a restart would have become a
reschedule). The request is recorded on the pod before acting, so a retry never acts twice.
"""

from __future__ import annotations

import json

from activities.recovery.placement import CHANGED_BY, REASON
from podmedic.domain.base import Obj
from podmedic.domain.policy_recovery import InPlace
from podmedic.kube import podview
from podmedic.workload import protocol

BASELINE = "podmedic.io/restart-baseline"
EXEC_DONE = "podmedic.io/restart-exec"
EXIT_CODE = "podmedic.io/restart-exit-code"


def exit_action(container: Obj, pod_policy: str, code: int) -> str:
    """What the kubelet does when ``container`` exits with ``code``: its first matching
    ``restartPolicyRules`` action, else its restart policy, else the pod's."""
    for rule in container.get("restartPolicyRules") or []:
        codes = rule.get("exitCodes") or {}
        values = codes.get("values") or []
        if (codes.get("operator", "In") == "In") == (code in values):
            return str(rule.get("action", "Restart"))
    policy = container.get("restartPolicy") or pod_policy or "Always"
    return "Restart" if policy == "Always" or (policy == "OnFailure" and code != 0) else "DoNotRestart"


def plan(pod: Obj, in_place: InPlace) -> tuple[str, int] | str:
    """``(trigger container, exit code)`` of the restart, or why the mechanism cannot restart
    this pod in place."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    mechanism = in_place.mechanism
    if mechanism == "exec_signal":
        code = in_place.signal_exit_code
        uses_device = [c for c in containers if (c.get("resources") or {}).get("claims")]
        target = (uses_device or containers)[0]
        wanted: tuple[str, ...] = ("Restart", "RestartAllContainers")
    else:
        raw = podview.annotations_of(pod).get(EXIT_CODE)
        if raw is None or not raw.isdigit():
            return f"pod declares no {EXIT_CODE} (the code its restartPolicyRules restart in place)"
        code = int(raw)
        wanted = ("RestartAllContainers",) if mechanism == "restart_all_containers" else ("Restart",)
        matching = [c for c in containers if exit_action(c, spec.get("restartPolicy", ""), code) in wanted]
        if not matching:
            rule = "RestartAllContainers (KEP-5532)" if mechanism == "restart_all_containers" else "Restart"
            return f"no container of the pod turns exit code {code} into {rule}: the exit would not restart in place"
        target = matching[0]
    action = exit_action(target, spec.get("restartPolicy", ""), code)
    if action not in wanted:
        return (f"container {target['name']} exiting with {code} (SIG{in_place.signal}) would not be restarted "
                f"in place (its rules/restartPolicy say {action})")
    return str(target["name"]), code


def container_restarts(pod: Obj) -> dict[str, int]:
    """restartCount by container name."""
    return {c["name"]: int(c.get("restartCount") or 0)
            for c in (pod.get("status") or {}).get("containerStatuses") or []}


def request_annotations(pod: Obj, request_id: str, in_place: InPlace, incident_id: str,
                        container: str, code: int) -> dict[str, str | None]:
    """What podmedic writes on the pod before acting: the request, the baseline, who and why."""
    how = (f"kill -s {in_place.signal} 1 (exit {code})" if in_place.mechanism == "exec_signal"
           else f"exit code {code}")
    notes: dict[str, str | None] = {
        BASELINE: json.dumps(container_restarts(pod), sort_keys=True),
        CHANGED_BY: incident_id,
        REASON: f"in-place restart of {container} by {in_place.mechanism} ({how})",
    }
    if in_place.mechanism == "exec_signal":
        notes[EXEC_DONE] = request_id
    else:
        notes[protocol.RESTART_REQUEST] = request_id
    return notes


def already_requested(pod: Obj, request_id: str, in_place: InPlace) -> dict[str, int] | None:
    """The baseline recorded by an earlier try of this request, if any (a retry)."""
    notes = podview.annotations_of(pod)
    key = EXEC_DONE if in_place.mechanism == "exec_signal" else protocol.RESTART_REQUEST
    if notes.get(key) != request_id or BASELINE not in notes:
        return None
    try:
        baseline = json.loads(notes[BASELINE])
    except ValueError:
        return None
    return {str(k): int(v) for k, v in baseline.items()} if isinstance(baseline, dict) else None


def restarted(pod: Obj, baseline: dict[str, int], in_place: InPlace, container: str) -> bool:
    """The restart happened: the trigger container's restartCount grew (every container's,
    for ``restart_all_containers``), and the pod is Ready with Healthy devices."""
    now = container_restarts(pod)
    names = list(baseline) if in_place.mechanism == "restart_all_containers" else [container]
    grew = all(now.get(n, 0) > baseline.get(n, 0) for n in names)
    return grew and podview.is_ready(pod) and podview.devices_healthy(pod)
