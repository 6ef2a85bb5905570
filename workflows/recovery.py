"""The recovery ladder: rungs tried in order, each with attempts, a timeout and a verification."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.recover import RecoverActivities
    from podmedic.incident import Phase
    from podmedic.models import PodRef
    from podmedic.policy import LadderRung
    from podmedic.steps import RecoverInput, RecoveryResult
    from workflows.options import activity_options

if TYPE_CHECKING:
    from workflows.incident import DeviceIncidentWorkflow

_ACTIONS = {
    "in_place_restart": RecoverActivities.restart_in_place,
    "same_node": RecoverActivities.reschedule_same_node,
}


async def run_ladder(wf: DeviceIncidentWorkflow, pod: PodRef, rungs: list[LadderRung]) -> RecoveryResult:
    """Climb the ladder for one pod until a rung verifies; returns the last result."""
    result = RecoveryResult(verified=False, action="none", pod=pod, detail="no rung in the policy")
    current = pod
    for rung in rungs:
        for attempt in range(1, rung.attempts + 1):
            wf.enter(Phase.RECOVERING, "recover")
            summary = f"{rung.action} {current.namespace}/{current.name} (attempt {attempt}/{rung.attempts})"
            workflow.set_current_details(f"**Recovering** — {summary}")
            result = await workflow.execute_activity_method(
                _ACTIONS[rung.action],
                RecoverInput(
                    incident_id=wf.state.incident_id,
                    request_id=wf.request_id(rung.action, attempt),
                    pod=current,
                    device=wf.inp.device,
                    timeout_s=rung.timeout_s,
                    poll_s=wf.policy.recovery.verify_poll_s,
                ),
                **activity_options(wf.policy.steps.recover, summary, min_start_to_close_s=rung.timeout_s + 30),
            )
            wf.note("recover", f"{summary}: {'verified' if result.verified else 'not verified'}; {result.detail}")
            if result.verified:
                return result
            if result.pod is not None:
                current = result.pod
    return result
