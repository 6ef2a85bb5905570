"""podmedic's own process-side metrics (ingest, activities, guard), as OpenTelemetry instruments.

Workflow-side metrics (time to quarantine, time to recover, phases, outcomes) are recorded
through the Temporal SDK's replay-safe ``workflow.metric_meter()`` in ``workflows/record/metrics.py``
and reach the same exporters through ``podmedic/telemetry/temporal_bridge.py``.

Every function here is safe to call when telemetry is not installed: the instruments are then
the API's no-op ones, so call sites never check.
"""

from __future__ import annotations

import threading

from opentelemetry.metrics import Meter, NoOpMeterProvider


class PodmedicMetrics:
    """The instruments of one meter; names as exported to Prometheus are in docs/observability.md."""

    def __init__(self, meter: Meter) -> None:
        self.ingest_events = meter.create_counter(
            "podmedic_ingest_events", description="Observations handled by the ingest, by source and outcome "
                                                  "(accepted, deduplicated, failed).")
        self.unresolved_devices = meter.create_counter(
            "podmedic_unresolved_devices", description="Pod-status device reports podmedic could not tie to one "
                                                       "DRA device (each is reported on its pod), by source.")
        self.ingest_rejected = meter.create_counter(
            "podmedic_ingest_rejected", description="HTTP requests the ingest refused, by route and status.")
        self.ingest_leader = meter.create_gauge(
            "podmedic_ingest_leader", description="1 while this ingest replica holds the Lease and runs the "
                                                  "cluster watches, 0 while it stands by (client-go's "
                                                  "leader_election_master_status), by lease.")
        self.actions = meter.create_counter(
            "podmedic_actions", description="Activity executions (actions on the cluster, tickets, notices) "
                                            "by kind, driver and outcome.")
        self.action_retries = meter.create_counter(
            "podmedic_action_retries", description="Activity attempts after the first, by kind and driver.")
        self.action_duration = meter.create_histogram(
            "podmedic_action_duration", unit="s", description="Duration of one activity attempt, by kind.")
        self.guard_state = meter.create_gauge(
            "podmedic_guard_state", description="1 for the fleet guard's current state, 0 for the others.")
        self.guard_devices_tainted = meter.create_gauge(
            "podmedic_guard_devices_tainted", description="Devices tainted by podmedic now, as the guard counts.")
        self.guard_nodes_disrupted = meter.create_gauge(
            "podmedic_guard_nodes_disrupted", description="Nodes podmedic disrupts now, as the guard counts.")
        self.guard_devices_limit = meter.create_gauge(
            "podmedic_guard_devices_limit", description="The guard's max_devices_tainted in force.")
        self.guard_nodes_limit = meter.create_gauge(
            "podmedic_guard_nodes_limit", description="The guard's max_nodes_disrupted in force.")
        self._guard_states: set[str] = set()
        self._lock = threading.Lock()

    def set_guard_state(self, state: str, *, devices_tainted: int | None = None,
                        nodes_disrupted: int | None = None, scope: str = "fleet",
                        limits: tuple[int, int] | None = None) -> None:
        """Publish the fleet guard's state (e.g. ``ok``, ``tripped``, ``dry_run``) and its counts.

        Every state ever published keeps a series: the current one at 1, the others at 0, so
        ``podmedic_guard_state{state="tripped"} == 1`` is an alert rule.
        """
        with self._lock:
            self._guard_states.add(state)
            for known in sorted(self._guard_states):
                self.guard_state.set(1 if known == state else 0, {"state": known, "scope": scope})
        if devices_tainted is not None:
            self.guard_devices_tainted.set(devices_tainted, {"scope": scope})
        if nodes_disrupted is not None:
            self.guard_nodes_disrupted.set(nodes_disrupted, {"scope": scope})
        if limits is not None:  # (devices, nodes): what the counts are held against, for dashboards
            self.guard_devices_limit.set(limits[0], {"scope": scope})
            self.guard_nodes_limit.set(limits[1], {"scope": scope})


_NOOP = PodmedicMetrics(NoOpMeterProvider().get_meter("podmedic"))
_current = _NOOP


def metrics() -> PodmedicMetrics:
    """The process's instruments (no-op ones until ``podmedic.telemetry.install``)."""
    return _current


def use(instruments: PodmedicMetrics | None) -> None:
    """Make ``instruments`` the process's (``None``: back to no-op); called by install/shutdown."""
    global _current
    _current = instruments if instruments is not None else _NOOP


def set_guard_state(state: str, *, devices_tainted: int | None = None, nodes_disrupted: int | None = None,
                    scope: str = "fleet", limits: tuple[int, int] | None = None) -> None:
    """The fleet guard's hook: call on every change of state or counts, from any thread; ``limits`` are
    the policy's (max devices tainted, max nodes disrupted)."""
    _current.set_guard_state(state, devices_tainted=devices_tainted, nodes_disrupted=nodes_disrupted, scope=scope,
                             limits=limits)
