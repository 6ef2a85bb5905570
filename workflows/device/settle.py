"""The event that opens an incident for real: grace for Unknown health, a watch for flapping.

Unknown health becomes an incident only after the driver's grace period. A device that returns
to Healthy is watched for the flapping window before the incident closes, so a device that
keeps failing and recovering stays one incident.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain.classify import names_the_failure
    from podmedic.domain.incident import IncidentStopped, Phase
    from podmedic.domain.models import DeviceHealthEvent, Health, Outcome
    from workflows.context import IncidentContext
    from workflows.waiting.wait import wait_for


async def settle(wf: IncidentContext) -> DeviceHealthEvent:
    """The event that opens the incident for real.

    Unknown health becomes an incident only after the driver's grace period. A device
    that returns to Healthy is watched for the flapping window before the incident
    closes, so a device that keeps failing and recovering stays one incident.
    """
    index = 0
    while True:
        event = wf.events[index]
        if event.health is Health.UNKNOWN:
            grace = wf.policy.detection.unknown_grace_s
            wf.enter(Phase.WAITING_GRACE, None, f"health Unknown: waiting {grace:g}s for a clearer signal")
            wf.note("detect", f"health Unknown: waiting {grace:g}s grace for a clearer signal")
            found = await _next_event(wf, index, lambda e: e.health is not Health.UNKNOWN, grace,
                                           "Unknown-health grace period")
            if found is None:
                wf.note("detect", f"still Unknown after {grace:g}s: opening the incident")
                return event
            index = found
            event = wf.events[index]
        if event.health is not Health.HEALTHY:
            return event
        window = wf.policy.detection.flapping.window_s
        wf.enter(Phase.WATCHING, None, f"device back to Healthy; watching {window:g}s for it to fail again")
        wf.note("detect", f"device back to Healthy; watching {window:g}s for it to fail again")
        found = await _next_event(wf, index, lambda e: e.health is not Health.HEALTHY, window,
                                       "watch for flapping")
        if found is None:
            raise IncidentStopped(Outcome.CLEARED, "device returned to Healthy and stayed healthy "
                                  f"for the {window:g}s flapping window")
        index = found


async def corroborate(wf: IncidentContext, event: DeviceHealthEvent) -> DeviceHealthEvent:
    """The event to classify: ``event``, or one from another source that says what failed.

    Pod status names no XID unless the driver sends a message (a gate, off by default), while
    the node agent, a DCGM alert or a slice taint on the same device do. A bare Unhealthy waits
    up to the driver's ``detection.corroborate_s`` for such a report (already received ones
    count too); without one it is classified as it is.
    """
    wait = wf.policy.detection.corroborate_s
    if wait <= 0 or names_the_failure(event, wf.policy):
        return event

    def telling() -> DeviceHealthEvent | None:
        return next((e for e in wf.events if e.health is not Health.HEALTHY and names_the_failure(e, wf.policy)),
                    None)

    if (found := telling()) is None:
        wf.enter(Phase.WAITING_GRACE, None, f"{event.source} reports {event.health.value} without saying what "
                                            f"failed: waiting {wait:g}s for another source")
        wf.note("detect", f"{event.source} does not say what failed: waiting up to {wait:g}s for the node agent, "
                          "an alert or a slice taint")
        if not await wait_for(lambda: telling() is not None or wf.operator.abort_request is not None, at_most_s=wait,
                              summary="corroboration"):
            wf.note("detect", f"no other source named the failure within {wait:g}s: classifying the report as it is")
            return event
        wf.check_abort()
        found = telling()
        assert found is not None
    wf.note("detect", f"classifying by {found.source}: {found.health.value} {found.reason} {found.message}".strip())
    return found


async def _next_event(wf: IncidentContext, after: int, wanted: Callable[[DeviceHealthEvent], bool], timeout_s: float,
                      summary: str) -> int | None:
    """Index of the first event after ``after`` that is ``wanted``, waiting up to ``timeout_s``."""
    def position() -> int | None:
        return next((i for i in range(after + 1, len(wf.events)) if wanted(wf.events[i])), None)
    if not await wait_for(lambda: position() is not None or wf.operator.abort_request is not None, at_most_s=timeout_s,
                          summary=summary):
        return None
    wf.check_abort()
    return position()
