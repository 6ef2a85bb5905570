"""A device nothing can see: keep its taint and ask an operator, rather than untaint on no evidence.

A DeviceTaintRule is removed only once a source that can see the device (a pod using it, the
driver's ResourceSlice, the node agent) reports it Healthy after the failure. An idle device
whose driver publishes no taint and whose node runs no agent reads Unknown: absence of bad news
is not good news, so the incident keeps the taint and waits in ``AwaitingApproval`` on the
``untaint`` step. ``approve`` removes the taint on the operator's word, ``skip`` keeps it, and
without an answer within ``approvals.timeout_s`` it is kept. A Healthy report arriving
meanwhile settles it as verified.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain import search
    from podmedic.domain.flapping import healthy_report
    from podmedic.domain.incident import PendingApproval, Phase
    from workflows.context import IncidentContext
    from workflows.operator_checks import decision
    from workflows.waiting.wait import wait_for

STEP = "untaint"
GATE = "unverified_untaint"


async def ask_to_untaint(wf: IncidentContext, why: str) -> bool:
    """Whether the taint may go although no source verified the device: an operator's approval,
    or a Healthy report newer than the failure arriving while the incident asks."""
    rule = wf.state.taint_rule or "the taint"
    if STEP in wf.state.skip:
        wf.note("close", f"{why}; {rule} kept: untaint skipped by an operator ({wf.state.skip[STEP]})")
        return False
    timeout = wf.policy.approvals.timeout_s
    action = f"remove {rule} of {wf.inp.device.resource_id} unverified ({why})"
    resume = wf.state.phase
    wf.state.pending_approval = PendingApproval(step=STEP, action=action, gate=GATE, since=workflow.now(),
                                                timeout_s=timeout, on_timeout="keep the taint")
    wf.upsert(search.AWAITING_APPROVAL, STEP)
    wf.enter(Phase.AWAITING_APPROVAL, "close", f"{why}: keeping {rule}; waiting for an operator to approve "
                                               "removing it unverified")
    wf.note("close", f"{why}; {rule} stays until a source that can see the device reports it Healthy, or an "
                     f"operator approves untaint; kept if nobody answers within {timeout:g}s")
    try:
        if not await wait_for(lambda: wf.state.pending_approval is None or wf.operator.abort_request is not None
                              or healthy_report(wf.events) is not None,
                              at_most_s=timeout, summary=f"approval of untaint (kept after {timeout:g}s)"):
            wf.state.decisions.append(decision(STEP, "timed_out_keep", "policy", f"no answer within {timeout:g}s"))
            wf.note("close", f"no answer on untaint within {timeout:g}s: {rule} kept")
            return False
    finally:
        wf.state.pending_approval = None
        wf.upsert(search.AWAITING_APPROVAL, None)
    wf.check_abort()
    wf.enter(resume, "close", "untaint settled")
    if (report := healthy_report(wf.events)) is not None:
        wf.note("close", f"device verified: {report.source} reports it Healthy ({report.message or report.reason})")
        return True
    if STEP in wf.state.skip:
        wf.note("close", f"{rule} kept: untaint skipped by an operator ({wf.state.skip[STEP]})")
        return False
    wf.operator.approved.add(STEP)
    wf.note("close", f"{rule} to be removed unverified, approved by {wf.state.decisions[-1].by}")
    return True
