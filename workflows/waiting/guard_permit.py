"""The incident's side of the fleet guard: ask before each disruptive step, wait when held.

Inert unless the incident's policy carries an enabled ``guard`` section. Held incidents wait in
phase ``Throttled`` (``on_limit: wait``, and always during a storm) or at an approval gate named
``fleet_guard`` (``on_limit: ask_operator``): an operator's ``approve`` lets the step past the
limit, ``skip`` drops it, ``abort`` ends the incident.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.fleet_guard import GuardActivities
    from podmedic.domain import search
    from podmedic.domain.fleet_guard.messages import PermitAnswer, PermitRelease, PermitRequest
    from podmedic.domain.incident import PendingApproval, Phase
    from podmedic.domain.policy import DriverPolicy
    from workflows.activity_options import GIVE_BACK, URGENT
    from workflows.context import IncidentContext
    from workflows.waiting.wait import wait_for


GATE = "fleet_guard"


def guarded(policy: DriverPolicy) -> bool:
    """Whether an incident under ``policy`` asks the guard (its section is on)."""
    return policy.guard is not None and policy.guard.enabled


async def _ask(wf: IncidentContext, step: str, *, probe: bool = False,
               override_by: str | None = None) -> PermitAnswer:
    assert wf.policy.guard is not None
    mode = wf.state.failure_mode
    request = PermitRequest(incident_id=wf.state.incident_id, device=wf.inp.device, node=wf.state.node, step=step,
                            policy=wf.policy.guard, search_attributes=wf.inp.search_attributes,
                            override_by=override_by, probe=probe,
                            hardware=mode is None or not mode.blames_the_workload)
    return await workflow.execute_activity_method(
        GuardActivities.ask_guard, request, start_to_close_timeout=timedelta(seconds=30),
        # No answer, no disruption: a real ask retries until the guard answers; a dry-run probe gives up.
        retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=3 if probe else 0),
        summary=f"ask the fleet guard: {step} {wf.inp.device.resource_id}"[:200],
        priority=URGENT,  # the answer stands between a failed device and its taint
    )


async def permit(wf: IncidentContext, step: str, action: str, *, wait: bool = True) -> bool | None:
    """Whether ``step`` may be taken now: waits while the guard holds it; False when an operator
    skipped it meanwhile; ``None`` when the guard holds it and ``wait`` is off. In dry run the
    guard is only asked what it would do."""
    if not guarded(wf.policy):
        return True
    if wf.policy.dry_run:
        try:
            answer = await _ask(wf, step, probe=True)
        except ActivityError as err:
            wf.note("guard", f"dry-run: the fleet guard did not answer about {step}: {err.cause or err}")
            return True
        verdict = "allow" if answer.granted else f"hold ({answer.limit})"
        wf.note("guard", f"dry-run: the fleet guard would {verdict} {step}: {answer.detail}")
        return True
    guard = wf.policy.guard
    assert guard is not None
    resume, held, override = wf.state.phase, "", None
    while True:
        answer = await _ask(wf, step, override_by=override)
        wf.waits.guard_asked = True
        if answer.granted:
            _settle(wf)
            if held:
                wf.note("guard", f"{step} allowed by the fleet guard: {answer.detail}")
                wf.enter(resume, None, f"{step} allowed by the fleet guard; going on")
            return True
        if not wait:
            return None
        if held != answer.detail:
            held = answer.detail
            wf.note("guard", f"{step} held by the fleet guard ({answer.limit}): {answer.detail}")
        if guard.on_limit == "ask_operator" and not answer.storm:
            _ask_operator(wf, step, action, answer)
        else:
            _settle(wf)
            doing = f"{step} waits for the fleet guard ({answer.limit}): {answer.detail}"
            if wf.state.phase is Phase.THROTTLED:  # still held: new numbers, not a new phase entry
                wf.state.doing = doing
                wf.refresh_details()
            else:
                wf.enter(Phase.THROTTLED, None, doing)
        wf.waits.guard_woke = False
        pending = wf.state.pending_approval
        await wait_for(_wakes(wf, step, gated=pending is not None), at_most_s=guard.retry_s,
                       summary=f"fleet guard holds {step}")
        wf.check_abort()
        if step in wf.state.skip:
            _settle(wf)
            wf.enter(resume, None, f"{step} skipped by an operator while held by the fleet guard")
            return False
        if pending is not None and wf.state.pending_approval is None:
            override = wf.state.decisions[-1].by if wf.state.decisions else "operator"


def _wakes(wf: IncidentContext, step: str, *, gated: bool) -> Callable[[], bool]:
    """What ends a wait: the guard's wake-up, an abort, a skip, an approval (when gated)."""
    return lambda: (wf.waits.guard_woke or wf.operator.abort_request is not None or step in wf.state.skip
                    or (gated and wf.state.pending_approval is None))


def _ask_operator(wf: IncidentContext, step: str, action: str, answer: PermitAnswer) -> None:
    """Put the step at the ``fleet_guard`` gate (once); ``approve`` takes it past the limit."""
    if wf.state.pending_approval is not None:
        return
    assert wf.policy.guard is not None
    wf.state.pending_approval = PendingApproval(
        step=step, action=f"{action}, past the fleet guard's {answer.limit} limit: {answer.detail}", gate=GATE,
        since=workflow.now(), timeout_s=wf.policy.guard.retry_s, on_timeout="ask the guard again")
    wf.upsert(search.AWAITING_APPROVAL, step)
    wf.enter(Phase.AWAITING_APPROVAL, None, f"fleet guard limit {answer.limit}: waiting for an operator to approve "
                                            f"{step} (or for the guard to have room)")


def _settle(wf: IncidentContext) -> None:
    """Drop a fleet-guard gate that is no longer needed (the guard made room)."""
    pending = wf.state.pending_approval
    if pending is not None and pending.gate == GATE:
        wf.state.pending_approval = None
    wf.upsert(search.AWAITING_APPROVAL, None)


async def release(wf: IncidentContext) -> None:
    """Give back what the incident held (it closed); losing this only delays others by ``retry_s``."""
    if not wf.waits.guard_asked:
        return
    try:
        await workflow.execute_activity_method(
            GuardActivities.release_guard, PermitRelease(incident_id=wf.state.incident_id),
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=GIVE_BACK,
            summary="give back the fleet guard's permit",
        )
    except ActivityError as err:
        wf.note("guard", f"permit not given back (the guard keeps counting it): {err.cause or err}")
