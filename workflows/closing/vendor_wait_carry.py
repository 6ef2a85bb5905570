"""A vendor wait that continues as a new run: what one run hands over, and how the next takes it up.

A weeks-long wait for the vendor and a device that keeps reporting would outgrow Temporal's
history (``VENDOR_WAIT_HISTORY``), so the wait continues as a new run carrying the record, the
latest reports, the operators' words and where the wait stands (``VendorWaitCarry``). Both
directions live here so that what is handed over and what is taken up stay one list.
"""

from __future__ import annotations

import datetime as dt

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain.incident import EVENTS_CARRIED, VendorWaitCarry
    from workflows.context import IncidentContext
    from workflows.record.pod_notices import drain


def take_up(wf: IncidentContext, carry: VendorWaitCarry) -> set[str]:
    """Take up the record and the vendor wait of the run ``wf`` continues; returns the event ids seen."""
    wf.state = carry.state
    wf.events = list(carry.events)
    wf.operator.resolution, wf.operator.resolved_by_operator = carry.resolution, carry.resolved_by_operator
    wf.operator.approved, wf.operator.done = set(carry.approved), set(carry.done)
    wf.waits.guard_asked, wf.waits.turn_asked = carry.guard_asked, carry.turn_asked
    wf.notices.annotated = set(carry.annotated)
    return set(carry.seen_ids)


async def continue_wait(wf: IncidentContext, deadline: dt.datetime, gap: float, news_from: int,
                        read_healthy: bool) -> None:
    """Continue as a new run that takes the vendor wait up where it stands (never returns).

    Args:
        wf: The incident waiting for its vendor.
        deadline: When the wait gives up, whatever run it is in.
        gap: The next gap between the backend's status calls.
        news_from: The first report that counts as news to the wait (those after the ticket).
        read_healthy: Whether a read of the device has answered Healthy.
    """
    await drain(wf)
    await workflow.wait_condition(workflow.all_handlers_finished)
    runs = wf.carry.runs + 1 if wf.carry is not None else 2
    wf.note("ticket", f"continued as a new run ({runs} so far) while waiting for the vendor: this run's "
                      f"history reached {workflow.info().get_current_history_length()} events")
    news = wf.events[news_from:][-EVENTS_CARRIED:]
    carry = VendorWaitCarry(
        state=wf.state, events=news, seen_ids=[e.event_id for e in news], resolution=wf.operator.resolution,
        resolved_by_operator=wf.operator.resolved_by_operator, approved=sorted(wf.operator.approved),
        done=sorted(wf.operator.done),
        guard_asked=wf.waits.guard_asked, turn_asked=wf.waits.turn_asked,
        annotated=sorted(wf.notices.annotated, key=lambda p: (p.namespace, p.name, p.uid)),
        deadline=deadline, gap_s=gap, read_healthy=read_healthy, runs=runs)
    workflow.continue_as_new(wf.inp.model_copy(update={"carry": carry.model_dump_json()}))
