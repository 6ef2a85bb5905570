"""The recovery ladder: rungs tried in order, each with attempts, a timeout and a verification.

A rung may be gated by the driver's approval policy (once per incident) or skipped by an
operator; each attempt is told to the pods it concerns.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.recovery.recover import RecoverActivities
    from podmedic.domain.incident import Phase
    from podmedic.domain.models import PodKey, PodRef
    from podmedic.domain.policy_recovery import InPlace, LadderRung
    from podmedic.domain.steps import CheckpointReport, CheckpointStatus, RecoverInput, RecoveryResult
    from workflows.activity_options import activity_options
    from workflows.context import IncidentContext
    from workflows.device import node_takes_over
    from workflows.record.pod_notices import tell_pods
    from workflows.waiting import guard_permit
    from workflows.waiting.approval_gate import clear_to


_ACTIONS = {
    "in_place_restart": RecoverActivities.restart_in_place,
    "same_node": RecoverActivities.reschedule_same_node,
    "any_node": RecoverActivities.reschedule_any_node,
}
_WHAT = {
    "in_place_restart": "restart {pod}'s containers in place (same pod, same device allocation)",
    "same_node": "evict {pod} so its replacement lands on a healthy device of the same node",
    "any_node": "evict {pod} so its replacement lands on a healthy device of any node",
}


async def run_ladder(wf: IncidentContext, pod: PodRef, rungs: list[LadderRung], purpose: str = "") -> RecoveryResult:
    """Climb the ladder for one pod until a rung verifies; returns the last result. A ``purpose``
    other than the ladder's own (moving off a node) keeps its request ids apart from the ladder's."""
    result = RecoveryResult(verified=False, action="none", pod=pod, detail="no rung in the policy")
    current = pod
    for rung in rungs:
        if node_takes_over.skip_rung(wf, rung):
            continue
        if rung.action == "node_quarantine":  # the node's watch gates it, not this incident
            result = await node_takes_over.quarantine_rung(wf, current, rung)
            continue
        why_not = _cannot_restart_in_place(wf.state.checkpoint, wf.policy.recovery.in_place, current) \
            if rung.action == "in_place_restart" else None
        if why_not:
            wf.note("recover", f"in-place restart of {current.namespace}/{current.name} left out: {why_not}")
            continue
        what = _WHAT[rung.action].format(pod=f"{current.namespace}/{current.name}")
        if not await clear_to(wf, rung.action, what) or not await guard_permit.permit(wf, rung.action, what):
            continue
        if wf.policy.dry_run:
            wf.note("recover", f"dry-run: would {what} ({rung.attempts} attempt(s), verified within "
                               f"{rung.timeout_s:g}s), then the next rung if it does not verify")
            result = RecoveryResult(verified=False, action=rung.action, pod=current, detail="dry-run: not done")
            continue
        for attempt in range(1, rung.attempts + 1):
            summary = f"{rung.action} {current.namespace}/{current.name} (attempt {attempt}/{rung.attempts})"
            wf.enter(Phase.RECOVERING, "recover", summary)
            wf.operator.running = rung.action
            result = await workflow.execute_activity_method(
                _ACTIONS[rung.action],
                RecoverInput(
                    incident_id=wf.state.incident_id,
                    request_id=wf.request_id(f"{purpose}-{rung.action}" if purpose else rung.action, attempt),
                    pod=current,
                    device=wf.inp.device,
                    timeout_s=rung.timeout_s,
                    poll_s=wf.policy.recovery.verify_poll_s,
                    in_place=wf.policy.recovery.in_place,
                    eviction=wf.policy.recovery.eviction,
                    verify_progress=wf.policy.recovery.verify_progress,
                ),
                **activity_options(wf.policy.steps.recover, summary,
                                   min_start_to_close_s=_limit_s(rung, wf.policy.recovery.eviction.max_wait_s)),
            )
            wf.operator.running = None
            for line in result.notes:
                wf.note("recover", f"{summary}: {line}")
            verdict = "verified" if result.verified else "not verified"
            wf.note("recover", f"{summary}: {verdict}; {result.detail}")
            await _tell(wf, current, result, f"{summary}: {verdict}; {result.detail}")
            if result.verified:
                wf.operator.done.add(rung.action)
                return result
            if result.pod is not None:
                current = result.pod
        wf.operator.done.add(rung.action)
    return result


def _cannot_restart_in_place(report: CheckpointReport | None, in_place: InPlace, pod: PodRef) -> str | None:
    """Why an in-place restart cannot work for ``pod``: the checkpoint (``report``) found its workload hung,
    and the mechanism needs the process to act (read a request and exit, or handle a catchable signal)."""
    hung = report is not None and any(r.status is CheckpointStatus.HUNG and r.pod == pod.name
                                       and r.namespace in ("", pod.namespace) for r in report.results)
    if not hung or (in_place.mechanism == "exec_signal" and in_place.signal == "KILL"):
        return None
    return (f"its workload was found hung at the checkpoint, and a hung process cannot act on the "
            f"{in_place.mechanism} restart (only exec_signal with KILL ends it)")


def _limit_s(rung: LadderRung, eviction_wait_s: float) -> float:
    """One attempt's limit: the rung's verification, a blocked eviction's wait (reschedules:
    waiting for the old pod to go and for the replacement), and a margin."""
    if rung.action == "in_place_restart":
        return rung.timeout_s + 30
    return 2 * rung.timeout_s + eviction_wait_s + 30


async def _tell(wf: IncidentContext, before: PodRef, result: RecoveryResult, message: str) -> None:
    """The pod before the attempt and the one after (a replacement, when rescheduled) get the Event,
    written once the attempt is verified or has failed, and named for which: an attempt that did not
    verify is never reported as done."""
    if result.action == "in_place_restart":
        step = "restarted" if result.verified else "restart_failed"
    else:
        step = "rescheduled" if result.verified else "reschedule_failed"
    pods = [before] + ([result.pod] if result.pod is not None and result.pod.uid != before.uid else [])
    keys = [PodKey(namespace=p.namespace, name=p.name, uid=p.uid) for p in pods]
    if result.pod is not None and result.pod.uid != before.uid:
        message += f"; now {result.pod.namespace}/{result.pod.name} on {result.pod.node or '?'}"
    await tell_pods(wf, step, message, pods=keys, warning=not result.verified)
