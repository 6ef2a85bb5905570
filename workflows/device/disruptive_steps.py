"""The disruptive-side stages: fence and taint the device, checkpoint the workload.

Each may be gated by the driver's approval policy and skipped by an operator; each tells
the affected pods what it did.

The incident's first action is a fence: a ``NoSchedule``
DeviceTaintRule, taken as soon as the event is classified, before discovery and the
checkpoint. It evicts nothing, so nothing has to wait for it, and every second it waited a
scheduler could hand the failed device to a new pod. The policy's effect follows the
checkpoint: a ``NoExecute`` taint evicts the pods, which is what must not happen before they
have saved, so the fence is raised to it then. A taint held at an approval gate is not
fenced: it comes after the checkpoint, so the checkpoint never waits on a person.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.checkpoints.checkpoint import CheckpointActivities
    from activities.taint import TaintActivities
    from podmedic.domain.incident import IncidentStopped, Phase
    from podmedic.domain.models import Outcome, PodRef
    from podmedic.domain.policy import DriverPolicy
    from podmedic.domain.policy_recovery import Effect
    from podmedic.domain.steps import (
        STOPPED_ON_DEAD_DEVICE,
        CheckpointInput,
        CheckpointReport,
        CheckpointStatus,
        Discovery,
        PodCheckpoint,
        TaintInput,
        TaintResult,
    )
    from workflows.activity_options import URGENT, activity_options, local_activity_options
    from workflows.context import IncidentContext
    from workflows.device import node_takes_over
    from workflows.record import metrics
    from workflows.record.pod_notices import tell_pods
    from workflows.waiting import guard_permit
    from workflows.waiting.approval_gate import clear_to


async def fence(wf: IncidentContext) -> bool:
    """Fence the device with a ``NoSchedule`` rule now, before discovery and the checkpoint.

    False (nothing done) in dry run, when the taint waits at an approval gate and when the fleet
    guard holds taints now: then the taint comes after the checkpoint (the fence never waits, so
    correlation and the checkpoint never wait behind it). The fence is a local activity, run in
    the workflow task that opened the incident, not queued behind every other incident's
    activity tasks in a storm.
    """
    if wf.policy.dry_run or wf.policy.approvals.gate_holding("taint") is not None:
        return False
    final = wf.policy.taint.effect(wf.permanent) is Effect.NO_SCHEDULE
    return await taint(wf, Effect.NO_SCHEDULE, final=final, wait_for_guard=False, local=True)


async def checkpoint_and_taint(wf: IncidentContext, discovery: Discovery, permanent: bool,
                               fenced: bool) -> None:
    """Checkpoint the workload, then taint the device with the policy's effect (after a fence:
    raise the fence to it when it evicts, which is what had to wait for the checkpoint)."""
    effect = wf.policy.taint.effect(permanent)
    # The opening notice names the fence's rule: the fence writes no Event of its own.
    wf.state.checkpoint = await checkpoint(wf, discovery, permanent)
    if not fenced or (wf.state.taint_rule and effect is not Effect.NO_SCHEDULE):
        await taint(wf, effect)


def _reachable(pods: list[PodRef], permanent: bool) -> tuple[list[PodRef], list[PodRef]]:
    """The device's pods a checkpoint request can reach, and those it cannot.

    A transient fault leaves every pod worth asking. A device that failed for good cannot run a
    crashed process again, but a process that still runs can still save (an HBM3 or NVLink
    error, announced maintenance: the job falls over seconds later), and that is the work the
    job would otherwise lose back to its last periodic checkpoint.
    """
    if not permanent:
        return pods, []
    return [p for p in pods if p.running], [p for p in pods if not p.running]


def _skip_reason(driver_policy: DriverPolicy, discovery: Discovery, permanent: bool,
                 reachable: list[PodRef]) -> str | None:
    """Why no checkpoint is asked for, as far as the driver's policy and the pods tell (operators aside)."""
    policy = driver_policy.checkpoint
    if not discovery.pods:
        return "no pod uses the device"
    if not policy.enabled:
        return f"checkpoints disabled for {driver_policy.driver}"
    if permanent and not reachable:
        return "device failed permanently and no pod on it still runs: nothing can save a checkpoint"
    if driver_policy.dry_run:
        pods = len(reachable) + (len(discovery.job_pods) if policy.whole_job else 0)
        return f"dry-run: would ask {pods} pod(s) to save a checkpoint ({policy.timeout_s:g}s)"
    return None


async def checkpoint(wf: IncidentContext, discovery: Discovery, permanent: bool) -> CheckpointReport:
    """Ask every pod on the device, and the other pods of their Jobs, to save their state together,
    unless there is no point or no consent; the report says complete, partial or none."""
    wf.enter(Phase.CHECKPOINTING, "checkpoint", "asking the workload to save its state before anything disruptive")
    policy = wf.policy.checkpoint
    siblings = discovery.job_pods if policy.whole_job else []
    reachable, dead = _reachable(discovery.pods, permanent)
    pods = reachable + siblings
    skip = _skip_reason(wf.policy, discovery, permanent, reachable)
    if skip is None and not await clear_to(wf, "checkpoint", f"ask {len(pods)} pod(s) to save a checkpoint"):
        skip = f"skipped by an operator: {wf.state.skip['checkpoint']}"
    if skip:
        everyone = discovery.pods + siblings
        last = [p.last_checkpoint_id for p in everyone if p.last_checkpoint_id]
        wf.note("checkpoint", f"skipped: {skip}; last known checkpoint(s): {', '.join(last) or 'none'}")
        await tell_pods(wf, "checkpointed", f"no checkpoint requested: {skip}; last known: {', '.join(last) or 'none'}")
        return _unsaved(everyone, CheckpointStatus.SKIPPED, skip)
    wf.operator.running = "checkpoint"
    more = f" and {len(siblings)} more of their job(s)" if siblings else ""
    wf.state.doing = f"waiting up to {policy.timeout_s:g}s for {len(reachable)} pod(s){more} to save"
    wf.refresh_details()
    try:
        report = await workflow.execute_activity_method(
            CheckpointActivities.request_checkpoints,
            CheckpointInput(incident_id=wf.state.incident_id, request_id=wf.request_id("ckpt"),
                            pods=pods, timeout_s=policy.timeout_s, poll_s=policy.poll_s, device_dead=permanent,
                            hang_s=policy.hang_s),
            **activity_options(wf.policy.steps.checkpoint, f"checkpoint {len(pods)} pod(s)",
                               min_start_to_close_s=policy.timeout_s + 30),
        )
    except ActivityError as err:
        if isinstance(err.cause, CancelledError):
            raise
        # A checkpoint is worth a bounded wait, never the device: the remediation goes on from the
        # last known checkpoint, as after a timeout.
        report = _unsaved(pods, CheckpointStatus.FAILED, f"the checkpoint step gave up: {err.cause or err}",
                          wf.request_id("ckpt"))
    if dead:
        report.results += _unsaved(dead, CheckpointStatus.SKIPPED, STOPPED_ON_DEAD_DEVICE).results
    wf.finished("checkpoint")
    for r in report.results:
        where = f" at {', '.join(r.locations)}" if r.locations else ""
        known = r.checkpoint_id or ""
        if known and r.status is not CheckpointStatus.SAVED:
            known = f"(last known checkpoint(s): {known})"
        wf.note("checkpoint", f"{r.pod} ({r.method}): {r.status.value} {known}{where} {r.reason}"
                .replace("  ", " ").strip())
    wf.note("checkpoint", f"checkpoint {report.summary} (request {report.request_id})")
    saved = ", ".join(f"{r.pod}: {r.status.value} {r.checkpoint_id or ''}".strip() for r in report.results)
    hung = next((r.reason for r in report.results if r.status is CheckpointStatus.HUNG), "")
    await tell_pods(wf, "checkpointed", f"checkpoint before remediation, {report.summary}: {saved}"
                                        + (f" ({hung})" if hung else ""))
    return report


async def _local_taint(wf: IncidentContext, request: TaintInput, summary: str) -> TaintResult:
    """The taint as a local activity. The SDK raises a failed local activity's own error (an
    ``ApplicationError``), not an ``ActivityError`` wrapping it as it does for an activity
    (``tests/workflow/test_sdk_local_activity.py`` pins it): a fence that gives up ends the incident
    here as any other step that gives up does (``DeviceIncidentWorkflow._work``)."""
    try:
        result: TaintResult = await workflow.execute_local_activity_method(
            TaintActivities.taint_device, request, **local_activity_options(wf.policy.steps.taint, summary))
    except FailureError as err:
        if isinstance(err, ActivityError | CancelledError):
            raise
        raise IncidentStopped(Outcome.FAILED, f"step {wf.state.phase.value} gave up: {err}") from err
    return result


def _unsaved(pods: list[PodRef], status: CheckpointStatus, reason: str, request_id: str = "") -> CheckpointReport:
    """Every pod with ``status`` and its last known checkpoint."""
    return CheckpointReport(request_id=request_id, results=[
        PodCheckpoint(pod=p.name, namespace=p.namespace, method=p.checkpoint_method, status=status,
                      checkpoint_id=p.last_checkpoint_id, reason=reason)
        for p in pods
    ])


async def taint(wf: IncidentContext, effect: Effect, *, final: bool = True, wait_for_guard: bool = True,
                local: bool = False) -> bool:
    """Create the incident's DeviceTaintRule with ``effect``, or raise its effect to it.

    A fence that may still be raised is not ``final``: an operator can still skip the taint
    step. False only when the fleet guard holds the taint and ``wait_for_guard`` is off.
    ``local``: as a local activity (the fence), in the workflow task that is running.
    """
    device = wf.inp.device.resource_id
    fenced = wf.state.taint_rule  # taken before the checkpoint: this raises it
    node_incident = node_takes_over.covered(wf.state, wf.policy)
    if fenced and node_incident:
        wf.note("taint", f"DeviceTaintRule {fenced} left at NoSchedule: node incident {node_incident} "
                         "quarantines the node")
        return True
    if node_takes_over.skip_taint(wf):
        return True
    doing = f"raising {device}'s taint to {effect.value}" if fenced else f"tainting {device} {effect.value}"
    wf.enter(Phase.TAINTING, "taint", f"{doing} so no new pod gets it")
    evicts = " (evicts the pods using it)" if effect is Effect.NO_EXECUTE else ""
    kept = f"DeviceTaintRule {fenced} left at NoSchedule" if fenced else "no DeviceTaintRule"
    if not await clear_to(wf, "taint", f"DeviceTaintRule {effect.value} on {device}{evicts}",
                          no_execute=effect is Effect.NO_EXECUTE):
        wf.note("taint", f"{kept}: skipped by an operator ({wf.state.skip['taint']})")
        return True
    allowed = await guard_permit.permit(wf, "taint", f"DeviceTaintRule {effect.value} on {device}{evicts}",
                                   wait=wait_for_guard)
    if allowed is None:
        wf.note("taint", "no fence: the fleet guard holds taints now; the taint waits for it after the checkpoint")
        return False
    if not allowed:
        wf.note("taint", f"{kept}: skipped by an operator ({wf.state.skip['taint']})")
        return True
    if wf.policy.dry_run:
        wf.note("taint", f"dry-run: would taint {device} {effect.value}{evicts} (DeviceTaintRule "
                         f"{wf.inp.device.object_name})")
        return True
    wf.operator.running = "taint"
    request = TaintInput(incident_id=wf.state.incident_id, device=wf.inp.device, effect=effect, reason=wf.state.why)
    summary = f"taint {device} {effect.value}"
    if local:
        result = await _local_taint(wf, request, summary)
    else:
        result = await workflow.execute_activity_method(
            TaintActivities.taint_device, request, **activity_options(wf.policy.steps.taint, summary, priority=URGENT))
    if final or result.unavailable:
        wf.finished("taint")
    else:
        wf.operator.running = None
    wf.state.taint_rule = result.rule_name
    if result.unavailable:
        await node_takes_over.quarantine_instead(wf, result.unavailable)
        return True
    if fenced:
        left = "" if result.effect is effect else f" (left at {result.effect.value}: edited by an operator)"
        wf.note("taint", f"DeviceTaintRule {result.rule_name} raised to {effect.value} after the checkpoint{left}")
        await tell_pods(wf, "taint_raised", f"device {device} taint raised to {result.effect.value}{evicts} now the "
                                       f"checkpoint is taken (DeviceTaintRule {result.rule_name})", warning=True)
        return True
    metrics.quarantined(wf.inp.device.driver, wf.events, effect.value)
    wf.note("taint", f"DeviceTaintRule {result.rule_name} ({effect.value}, "
                     f"{'created' if result.created else 'already present'})")
    await tell_pods(wf, "tainted", f"device {device} tainted {effect.value}{evicts} by DeviceTaintRule "
                                   f"{result.rule_name}: {wf.state.why}", warning=True)
    return True
