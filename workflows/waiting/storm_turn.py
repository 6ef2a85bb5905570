"""The incident's side of a storm's turns: once fenced, wait for the driver's keeper to let it act.

Only incidents the ingest opened during a storm of their driver (``IncidentInput.storm``) wait.
The device is fenced before the wait (its pool's rule
and its own NoSchedule rule), so no new pod gets it while the incident waits in phase
``Throttled``; an operator's abort still ends it. Every ``storm_fence.max_hold_s`` of waiting it
asks again: a keeper that was terminated is started anew by the ask and queues it, so no
incident is stranded; one that cannot ask at all goes on without a turn. It never goes on
because the wait was long: ten thousand incidents going on together is what the turns prevent.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.storm_turns import TurnActivities
    from podmedic.domain.incident import Phase
    from podmedic.domain.storm_turns import TurnOver, TurnRequest
    from workflows.activity_options import GIVE_BACK
    from workflows.context import IncidentContext
    from workflows.waiting.wait import wait_for

_ASK = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=5)
_CALL = timedelta(seconds=30)


async def wait_turn(wf: IncidentContext) -> None:
    """Ask the driver's keeper for a turn and wait for it (a storm incident, fenced, not a dry run)."""
    rule = wf.policy.detection.storm_fence
    if not wf.inp.storm or not rule.enabled or wf.policy.dry_run:
        return
    if not await _ask(wf):
        return
    wf.waits.turn_asked = True
    waited_from = workflow.now()
    fenced = f"DeviceTaintRule {wf.state.taint_rule}" if wf.state.taint_rule else "its pool's DeviceTaintRule"
    doing = (f"fenced ({fenced}); waiting for its turn: {wf.inp.device.driver} storm, at most {rule.acting} "
             "incidents act at once (detection.storm_fence.acting)")
    wf.note("storm", doing)
    wf.enter(Phase.THROTTLED, None, doing)
    while not await wait_for(lambda: wf.waits.turn_given or wf.operator.abort_request is not None,
                             at_most_s=rule.max_hold_s, summary="storm turn"):
        waited = (workflow.now() - waited_from).total_seconds()
        wf.note("storm", f"no turn yet after {waited:.0f}s: asked again (storm_fence.max_hold_s)")
        if not await _ask(wf):
            return
    wf.check_abort()
    wf.note("storm", f"its turn came after {(workflow.now() - waited_from).total_seconds():.0f}s")


async def _ask(wf: IncidentContext) -> bool:
    """Ask the keeper (starting it when none runs); False, noted, when it cannot be asked: go on without."""
    device, rule = wf.inp.device, wf.policy.detection.storm_fence
    try:
        await workflow.execute_activity_method(
            TurnActivities.ask_turn, TurnRequest(incident_id=wf.state.incident_id, driver=device.driver,
                                                 acting=rule.acting, search_attributes=wf.inp.search_attributes),
            start_to_close_timeout=_CALL, retry_policy=_ASK, summary=f"ask for a storm turn: {device.driver}"[:200])
    except ActivityError as err:
        wf.note("storm", f"the storm's keeper could not be asked ({err.cause or err}): going on without a turn")
        return False
    return True


async def give_back(wf: IncidentContext) -> None:
    """Tell the keeper the incident closed (it asked); losing this only holds a turn until the keeper looks."""
    if not wf.waits.turn_asked:
        return
    try:
        await workflow.execute_activity_method(
            TurnActivities.give_back_turn, TurnOver(incident_id=wf.state.incident_id, driver=wf.inp.device.driver),
            start_to_close_timeout=_CALL,
            retry_policy=GIVE_BACK,
            summary="give the storm turn back")
    except ActivityError as err:
        wf.note("storm", f"storm turn not given back (the keeper frees it when it looks): {err.cause or err}")
