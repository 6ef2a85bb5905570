"""A device incident whose node is the incident: what it leaves to the node incident.

Covered devices get no DeviceTaintRule of their own (the node is cordoned and tainted), and
their ladders skip the same-node rung (a cordoned node takes no replacement pod). The
ladder's last rung, ``node_quarantine``, asks the node's watch to quarantine the node now.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.node import NodeActivities
    from podmedic.domain.node import NodeDeviceReport, NodeReportInput, NodeReportResult, NodeWatchInput
    from podmedic.domain.policy_recovery import LadderRung
    from podmedic.domain.steps import RecoveryResult
    from workflows.waiting import guard_permit
if TYPE_CHECKING:
    from podmedic.domain.incident import IncidentState
    from podmedic.domain.models import PodRef
    from podmedic.domain.policy import DriverPolicy
    from workflows.context import IncidentContext

SAME_NODE_RUNGS = ("same_node",)


def covered(state: IncidentState, policy: DriverPolicy) -> str | None:
    """The node incident that quarantines the device's node, if any (and the policy quarantines)."""
    if state.node_incident and policy.node_quarantine.enabled:
        return state.node_incident
    return None


def skip_taint(wf: IncidentContext) -> bool:
    """True (and recorded) when the node incident covers the device instead of a rule of its own."""
    node_incident = covered(wf.state, wf.policy)
    if node_incident is None:
        return False
    wf.note("taint", f"no DeviceTaintRule: covered by node incident {node_incident} (it cordons and taints the "
                     "node instead, once approved and allowed: its state says whether it has)")
    return True


def skip_rung(wf: IncidentContext, rung: LadderRung) -> bool:
    """True (and recorded) for a same-node rung while the node is quarantined, or while other devices
    of the node failed within the correlation window: a node that may be turning bad is no place to
    put the workload back, even before it is a node incident."""
    if rung.action not in SAME_NODE_RUNGS:
        return False
    node_incident = covered(wf.state, wf.policy)
    if node_incident is not None:
        wf.note("recover", f"{rung.action} skipped: node {wf.state.node} is node incident {node_incident}, which "
                           "quarantines it: a node turning bad takes no replacement")
        return True
    if wf.state.node_failures:
        wf.note("recover", f"{rung.action} skipped: other devices of its node failed within the "
                           f"correlation window ({', '.join(wf.state.node_failures)})")
        return True
    return False


async def quarantine_rung(wf: IncidentContext, pod: PodRef, rung: LadderRung) -> RecoveryResult:
    """Ask the node's watch to quarantine the node (signal-with-start); it gates and acts."""
    node = pod.node or wf.state.node or wf.inp.device.pool
    if "node_quarantine" in wf.state.skip:
        wf.note("recover", f"node_quarantine skipped by an operator: {wf.state.skip['node_quarantine']}")
        return RecoveryResult(verified=False, action="node_quarantine", pod=pod, detail="skipped by an operator")
    if wf.state.failure_mode is None:
        return RecoveryResult(verified=False, action="node_quarantine", pod=pod, detail="no classification")
    what = f"ask node {node}'s watch to cordon and taint the node"
    if not await guard_permit.permit(wf, "node_quarantine", what):
        wf.note("recover", f"node_quarantine skipped by an operator: {wf.state.skip['node_quarantine']}")
        return RecoveryResult(verified=False, action="node_quarantine", pod=pod, detail="skipped by an operator")
    if wf.policy.dry_run:
        wf.note("recover", f"dry-run: would {what}")
        return RecoveryResult(verified=False, action="node_quarantine", pod=pod, detail="dry-run: not done")
    answer = await _ask_watch(wf, node, f"{wf.state.why}; ladder exhausted", rung.timeout_s)
    wf.operator.done.add("node_quarantine")
    detail = _record(wf.state, node, answer)
    wf.note("recover", f"node_quarantine: {detail}")
    return RecoveryResult(verified=False, action="node_quarantine", pod=pod, detail=detail)


async def quarantine_instead(wf: IncidentContext, unavailable: str) -> None:
    """The cluster serves no DeviceTaintRule: ask the node's watch to quarantine the whole node, the
    one fence left (the node incident cordons and taints the node, gated as it always is)."""
    node = wf.state.node or wf.inp.device.pool
    wf.note("taint", f"no DeviceTaintRule: {unavailable}")
    if wf.state.failure_mode is None or covered(wf.state, wf.policy):
        return
    answer = await _ask_watch(wf, node, f"{wf.state.why}; the cluster cannot taint one device", 30.0)
    wf.note("taint", f"node quarantine instead of a device taint: {_record(wf.state, node, answer)}")


async def _ask_watch(wf: IncidentContext, node: str, why: str, timeout_s: float) -> NodeReportResult:
    """Signal-with-start the node's watch with a quarantine request for this device's incident."""
    assert wf.state.failure_mode is not None
    report = NodeDeviceReport(incident_id=wf.state.incident_id, device=wf.inp.device,
                              failure_mode=wf.state.failure_mode, observed_at=workflow.now(), why=why)
    watch = NodeWatchInput.under(node, wf.inp.device.driver, wf.policy, search_attributes=wf.inp.search_attributes)
    answer: NodeReportResult = await workflow.execute_activity_method(
        NodeActivities.request_node_quarantine, NodeReportInput(watch=watch, report=report),
        start_to_close_timeout=timedelta(seconds=max(timeout_s, 10)),
        retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=10)),
        summary=f"ask node {node}'s watch to quarantine the node",
    )
    return answer


def _record(state: IncidentState, node: str, answer: NodeReportResult) -> str:
    """Remember the node incident that now covers the device; what happened, in words."""
    if answer.node_incident and state.node_incident is None:
        state.node_incident = answer.node_incident
    done = "quarantined" if answer.quarantined else "quarantine requested (the node incident may wait for approval)"
    return f"node {node} {done} by {answer.watch_id}"
