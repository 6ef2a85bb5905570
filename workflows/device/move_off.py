"""Moving off a node that turned out bad: the pods this incident had just placed there.

A ``same_node`` reschedule is decided on what is known at the time. When the node becomes a
node incident within the correlation window after that placement, the replacement runs on a
node podmedic now quarantines (a NoSchedule quarantine leaves running pods where they are).
The incident asks those pods to save a checkpoint, then moves them with its ``any_node`` rung
(the cordon keeps the replacement off the node). Placements made earlier than the window are
the node incident's business, like every other pod on the node.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.checkpoints.checkpoint import CheckpointActivities
    from podmedic.domain.models import PodRef
    from podmedic.domain.policy_recovery import LadderRung
    from podmedic.domain.steps import CheckpointInput, RecoveryResult
    from workflows.activity_options import activity_options
    from workflows.context import IncidentContext
    from workflows.device.recovery_ladder import run_ladder
    from workflows.record import metrics

@dataclass
class Placement:
    """A replacement this incident put on the failed device's node, and when."""

    pod: PodRef
    at: dt.datetime
    moved: bool = False


@dataclass
class Placements:
    """The incident's same-node placements and when it learned its node is the incident."""

    node_incident_at: dt.datetime | None = None
    made: list[Placement] = field(default_factory=list)

    def remember(self, result: RecoveryResult, at: dt.datetime) -> None:
        """Remember ``result`` when it is a verified same-node placement (made ``at``)."""
        if result.verified and result.action == "same_node" and result.pod is not None and result.same_node:
            self.made.append(Placement(pod=result.pod, at=at))

    def due(self, window_s: float) -> list[Placement]:
        """Placements to move now: made at most ``window_s`` before the node incident, not yet moved."""
        if self.node_incident_at is None:
            return []
        start = self.node_incident_at - dt.timedelta(seconds=window_s)
        return [p for p in self.made if not p.moved and p.at >= start]


async def if_due(wf: IncidentContext) -> None:
    """Checkpoint, then move off the node, each pod placed there within the window before its node
    became the incident."""
    window = wf.policy.detection.node_correlation.window_s
    todo = wf.placements.due(window)
    if not todo:
        return
    for p in todo:
        p.moved = True
    pods = [p.pod for p in todo]
    names = ", ".join(f"{p.namespace}/{p.name}" for p in pods)
    resume = wf.state.phase
    wf.note("recover", f"node {pods[0].node} became node incident {wf.state.node_incident} within {window:g}s of "
                       f"placing {names} there: checkpoint, then move off the node")
    await _checkpoint(wf, pods)
    ladder = wf.policy.recovery.permanent if wf.permanent else wf.policy.recovery.transient
    rungs = [r for r in ladder if r.action == "any_node"] or [LadderRung(action="any_node")]
    for pod in pods:
        result = await run_ladder(wf, pod, rungs, purpose="move-off")
        wf.state.recovery.append(result)
        metrics.recovered(wf.inp.device.driver, wf.events, result)
        wf.track_pods()
        verdict = "moved" if result.verified else "NOT moved"
        wf.note("recover", f"{pod.namespace}/{pod.name} {verdict} off node {pod.node}: {result.detail}")
    wf.enter(resume, None, f"{names} handled; back to {resume.value}")


async def _checkpoint(wf: IncidentContext, pods: list[PodRef]) -> None:
    policy = wf.policy.checkpoint
    if not policy.enabled:
        wf.note("checkpoint", f"no checkpoint before moving off: checkpoints disabled for {wf.policy.driver}")
        return
    report = await workflow.execute_activity_method(
        CheckpointActivities.request_checkpoints,
        CheckpointInput(incident_id=wf.state.incident_id, request_id=wf.request_id("move-off-ckpt"), pods=pods,
                        timeout_s=policy.timeout_s, poll_s=policy.poll_s, device_dead=False),
        **activity_options(wf.policy.steps.checkpoint, f"checkpoint {len(pods)} pod(s) before moving them",
                           min_start_to_close_s=policy.timeout_s + 30),
    )
    for r in report.results:
        wf.note("checkpoint", f"before moving off: {r.pod} ({r.method}): {r.status.value} {r.checkpoint_id or ''} "
                              f"{r.reason}".replace("  ", " ").strip())
