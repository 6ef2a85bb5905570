"""Approval gates: a gated step waits in phase ``AwaitingApproval`` for an operator.

The driver's policy names the gated actions (``approvals.gates``). A gate is settled by
the ``approve`` update, by ``skip`` (the step is not taken), by ``abort``, or by its
timeout, which proceeds or aborts as the policy says. Each settlement is recorded with
who made it; a step approved once is not asked again in the same incident.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain import search
    from podmedic.domain.incident import IncidentStopped, PendingApproval, Phase
    from podmedic.domain.models import Outcome
    from workflows.context import IncidentContext
    from workflows.operator_checks import timed_out
    from workflows.record.pod_notices import tell_pods
    from workflows.waiting.wait import wait_for



async def clear_to(wf: IncidentContext, step: str, action: str, *, no_execute: bool = False) -> bool:
    """Whether to take ``step`` now: False when an operator skipped it; waits at a gate.

    Raises ``IncidentStopped`` when the gate times out and the policy says abort, or when
    an operator aborts while it waits.
    """
    if step in wf.state.skip:
        wf.note(step, f"skipped by an operator: {wf.state.skip[step]}")
        return False
    gate = wf.policy.approvals.gate_holding(step, no_execute=no_execute)
    if gate is None or step in wf.operator.approved:
        return True
    if wf.policy.dry_run:
        wf.note("approval", f"dry-run: {step} would wait for an operator's approval (gate {gate.action}): {action}")
        return True
    approvals = wf.policy.approvals
    timeout = gate.timeout_s or approvals.timeout_s
    on_timeout = gate.on_timeout or approvals.on_timeout
    resume = wf.state.phase
    wf.state.pending_approval = PendingApproval(step=step, action=action, gate=gate.action, since=workflow.now(),
                                                timeout_s=timeout, on_timeout=on_timeout)
    wf.upsert(search.AWAITING_APPROVAL, step)
    wf.enter(Phase.AWAITING_APPROVAL, None, f"waiting for an operator to approve {step}: {action}")
    wf.note("approval", f"{step} needs approval (gate {gate.action}): {action}; "
                        f"{on_timeout} after {timeout:g}s without an answer")
    await tell_pods(wf, "awaiting_approval", f"incident waits for an operator to approve {step}: {action}")
    try:
        if not await wait_for(lambda: wf.state.pending_approval is None or wf.operator.abort_request is not None,
                              at_most_s=timeout, summary=f"approval of {step} ({on_timeout} after {timeout:g}s)"):
            _timed_out(wf, step, timeout, on_timeout)
    finally:
        wf.upsert(search.AWAITING_APPROVAL, None)
    wf.check_abort()
    skipped = step in wf.state.skip
    settled = wf.state.decisions[-1].decision if wf.state.decisions else "approved"
    if not skipped:
        wf.operator.approved.add(step)
    wf.enter(resume, None, f"{step} {'skipped by an operator' if skipped else settled.replace('_', ' ')}; going on")
    return not skipped


def _timed_out(wf: IncidentContext, step: str, timeout: float, on_timeout: str) -> None:
    """Nobody answered the gate in time: record the policy's decision; abort the incident if it says so."""
    wf.state.pending_approval = None
    wf.state.decisions.append(timed_out(step, on_timeout, timeout))
    wf.note("approval", f"no answer on {step} within {timeout:g}s: {on_timeout} (policy {wf.policy.driver})")
    if on_timeout == "abort":
        raise IncidentStopped(Outcome.ABORTED, f"approval of {step} not given within {timeout:g}s; "
                                           f"aborted as the {wf.policy.driver} policy says") from None
    wf.operator.approved.add(step)
