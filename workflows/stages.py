"""The disruptive-side stages before recovery: checkpoint the workload, taint the device.

Each may be gated by the driver's approval policy and skipped by an operator; each tells
the affected pods what it did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.checkpoint import CheckpointActivities
    from activities.taint import TaintActivities
    from podmedic.incident import Phase
    from podmedic.policy import Effect
    from podmedic.steps import (
        CheckpointInput,
        CheckpointReport,
        CheckpointStatus,
        Discovery,
        PodCheckpoint,
        TaintInput,
    )
    from workflows import guarded, node_cover, telemetry
    from workflows.gates import clear_to
    from workflows.notices import tell_pods
    from workflows.options import activity_options

if TYPE_CHECKING:
    from workflows.incident import DeviceIncidentWorkflow


async def checkpoint(wf: DeviceIncidentWorkflow, discovery: Discovery, permanent: bool) -> CheckpointReport:
    """Ask every pod on the device, and the other pods of their Jobs, to save their state together,
    unless there is no point or no consent; the report says complete, partial or none."""
    wf.enter(Phase.CHECKPOINTING, "checkpoint", "asking the workload to save its state before anything disruptive")
    policy = wf.policy.checkpoint
    pods = discovery.pods + (discovery.job_pods if policy.whole_job else [])
    skip = None
    if not discovery.pods:
        skip = "no pod uses the device"
    elif not policy.enabled:
        skip = f"checkpoints disabled for {wf.policy.driver}"
    elif permanent:
        skip = "device failed permanently: it cannot serve a checkpoint"
    elif wf.policy.dry_run:
        skip = f"dry-run: would ask {len(pods)} pod(s) to save a checkpoint ({policy.timeout_s:g}s)"
    elif not await clear_to(wf, "checkpoint", f"ask {len(pods)} pod(s) to save a checkpoint"):
        skip = f"skipped by an operator: {wf.state.skip['checkpoint']}"
    if skip:
        last = [p.last_checkpoint_id for p in pods if p.last_checkpoint_id]
        wf.note("checkpoint", f"skipped: {skip}; last known checkpoint(s): {', '.join(last) or 'none'}")
        report = CheckpointReport(results=[
            PodCheckpoint(pod=p.name, namespace=p.namespace, method=p.checkpoint_method,
                          status=CheckpointStatus.SKIPPED, checkpoint_id=p.last_checkpoint_id, reason=skip)
            for p in pods
        ])
        await tell_pods(wf, "checkpointed", f"no checkpoint requested: {skip}; last known: {', '.join(last) or 'none'}")
        return report
    wf.running = "checkpoint"
    siblings = f" and {len(pods) - len(discovery.pods)} more of their job(s)" if len(pods) > len(discovery.pods) else ""
    wf.state.doing = f"waiting up to {policy.timeout_s:g}s for {len(discovery.pods)} pod(s){siblings} to save"
    wf.refresh_details()
    report = await workflow.execute_activity_method(
        CheckpointActivities.request_checkpoints,
        CheckpointInput(incident_id=wf.state.incident_id, request_id=wf.request_id("ckpt"),
                        pods=pods, timeout_s=policy.timeout_s, poll_s=policy.poll_s),
        **activity_options(wf.policy.steps.checkpoint, f"checkpoint {len(pods)} pod(s)",
                           min_start_to_close_s=policy.timeout_s + 30),
    )
    wf.finished("checkpoint")
    for r in report.results:
        where = f" at {', '.join(r.locations)}" if r.locations else ""
        wf.note("checkpoint", f"{r.pod} ({r.method}): {r.status.value} {r.checkpoint_id or ''}{where} {r.reason}"
                .replace("  ", " ").strip())
    wf.note("checkpoint", f"checkpoint {report.summary} (request {report.request_id})")
    saved = ", ".join(f"{r.pod}: {r.status.value} {r.checkpoint_id or ''}".strip() for r in report.results)
    await tell_pods(wf, "checkpointed", f"checkpoint before remediation, {report.summary}: {saved}")
    return report


async def taint(wf: DeviceIncidentWorkflow, permanent: bool) -> None:
    """Create the incident's DeviceTaintRule with the policy's effect for this permanence."""
    if node_cover.skip_taint(wf):
        return
    effect = wf.policy.taint.permanent if permanent else wf.policy.taint.transient
    device = wf.inp.device.resource_id
    wf.enter(Phase.TAINTING, "taint", f"tainting {device} {effect.value} so no new pod gets it")
    evicts = " (evicts the pods using it)" if effect is Effect.NO_EXECUTE else ""
    if not await clear_to(wf, "taint", f"DeviceTaintRule {effect.value} on {device}{evicts}",
                          no_execute=effect is Effect.NO_EXECUTE):
        wf.note("taint", f"no DeviceTaintRule: skipped by an operator ({wf.state.skip['taint']})")
        return
    if not await guarded.permit(wf, "taint", f"DeviceTaintRule {effect.value} on {device}{evicts}"):
        wf.note("taint", f"no DeviceTaintRule: skipped by an operator ({wf.state.skip['taint']})")
        return
    if wf.policy.dry_run:
        wf.note("taint", f"dry-run: would taint {device} {effect.value}{evicts} (DeviceTaintRule "
                         f"{wf.inp.device.object_name})")
        return
    wf.running = "taint"
    result = await workflow.execute_activity_method(
        TaintActivities.taint_device,
        TaintInput(incident_id=wf.state.incident_id, device=wf.inp.device, effect=effect, reason=wf.state.why),
        **activity_options(wf.policy.steps.taint, f"taint {device} {effect.value}"),
    )
    wf.finished("taint")
    telemetry.quarantined(wf, effect.value)
    wf.state.taint_rule = result.rule_name
    wf.note("taint", f"DeviceTaintRule {result.rule_name} ({effect.value}, "
                     f"{'created' if result.created else 'already present'})")
    await tell_pods(wf, "tainted", f"device {device} tainted {effect.value}{evicts} by DeviceTaintRule "
                                   f"{result.rule_name}: {wf.state.why}", warning=True)
