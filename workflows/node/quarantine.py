"""What a node incident does to its node: approval, cordon + node taint, hold, and lift.

The quarantine waits at the ``node_quarantine`` approval gate when the driver's policy
gates it (a ``NoExecute`` node taint always waits: it evicts every pod on the node). Once
quarantined, the node incident also holds the DeviceTaintRules its devices already had, so
no device incident closing removes a rule the node still needs. It lifts everything when
every device incident closed with its device verified healthy (the device incidents verify
for the anti-flap delay) or an operator resolves it; otherwise it keeps the quarantine and
says so. A declined quarantine (skipped, or the gate's timeout says abort) taints the
covered devices one by one instead, held by the node incident.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.node import NodeActivities
    from activities.quarantine import QuarantineActivities
    from activities.taint import TaintActivities
    from podmedic.domain.incident import PendingApproval
    from podmedic.domain.models import DeviceRef
    from podmedic.domain.node import (
        DeviceIncidentsInput,
        HoldTaintsInput,
        NodeIncidentState,
        NodeWatchInput,
        QuarantineInput,
    )
    from podmedic.domain.node_explain import release_terms
    from podmedic.domain.policy_recovery import Effect
    from podmedic.domain.policy_steps import KUBE_REFUSALS
    from podmedic.domain.steps import TaintInput
    from workflows.activity_options import URGENT
    from workflows.context import NodeContext
    from workflows.node import plugin_devices
    from workflows.operator_checks import timed_out
    from workflows.waiting import node_guard_permit
    from workflows.waiting.wait import wait_for


_RETRY = RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=30),
                     non_retryable_error_types=list(KUBE_REFUSALS))
_TIMEOUT = timedelta(seconds=60)


def _devices(state: NodeIncidentState) -> list[DeviceRef]:
    return [DeviceRef.parse(rid) for rid in state.devices]


def _request(inp: NodeWatchInput, reason: str) -> QuarantineInput:
    q = inp.quarantine
    return QuarantineInput(node=inp.node, incident_id=workflow.info().workflow_id, cordon=q.cordon,
                           taint_key=q.taint_key, effect=q.effect, reason=reason)


async def run(wf: NodeContext) -> str:
    """Quarantine the node (or decline to), wait for the devices, lift or keep; the explanation."""
    q = wf.inp.quarantine
    devices = ", ".join(wf.failed())
    if wf.inp.dry_run:
        wf.note(f"dry-run: would cordon node {wf.inp.node} and taint it {q.taint_key}:{q.effect}", "quarantine")
        return f"dry-run: node {wf.inp.node} not quarantined (devices {devices} failed)"
    if not q.enabled:
        return await _decline(wf, "node quarantine is off in the policy")
    if not await _approved(wf):
        return await _decline(wf, "node quarantine not approved")
    if not await node_guard_permit.permit(wf):
        by = wf.resolution.by if wf.resolution else "an operator"
        return f"resolved by {by} while the fleet guard held the quarantine: node {wf.inp.node} left as it was"
    why = (f"node incident: devices {devices} failed" if wf.state.plugin_devices
           else f"node incident: devices {devices} failed together")
    result = await workflow.execute_activity_method(QuarantineActivities.quarantine_node, _request(wf.inp, why),
                                                    summary=f"cordon and taint node {wf.inp.node}",
                                                    start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY,
                                                    priority=URGENT)  # its devices wait for it to be tainted
    if not result.node_found:
        return f"node {wf.inp.node} not found: nothing to quarantine"
    wf.state.quarantined = True
    wf.state.phase = "Quarantined"
    wf.upsert("Quarantined")
    wf.note(f"node {wf.inp.node} {result.detail}", "quarantine")
    wf.state.held_rules = await workflow.execute_activity_method(
        TaintActivities.hold_taints, HoldTaintsInput(devices=_devices(wf.state), reason=f"held by {why}"),
        summary="hold the devices' DeviceTaintRules", start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY)
    if wf.state.held_rules:
        wf.note(f"holds DeviceTaintRules {', '.join(wf.state.held_rules)} while the node is quarantined",
                "quarantine")
    return await _hold(wf)


async def _approved(wf: NodeContext) -> bool:
    approvals = wf.inp.approvals
    gate = approvals.gate_for("node_quarantine")
    no_execute = wf.inp.quarantine.effect == Effect.NO_EXECUTE.value
    if gate is None and not no_execute:
        return True
    timeout = (gate.timeout_s if gate else None) or approvals.timeout_s
    on_timeout = (gate.on_timeout if gate else None) or approvals.on_timeout
    action = f"cordon node {wf.inp.node} and taint it {wf.inp.quarantine.taint_key}:{wf.inp.quarantine.effect}"
    wf.state.pending_approval = PendingApproval(step="node_quarantine", action=action,
                                                gate="node_quarantine" if gate else "node NoExecute taint",
                                                since=workflow.now(), timeout_s=timeout, on_timeout=on_timeout)
    wf.state.phase = "AwaitingApproval"
    wf.state.doing = f"waiting for an operator to approve node_quarantine: {action}"
    wf.upsert("AwaitingApproval", "node_quarantine")
    wf.details(f"**AwaitingApproval** — {action}\n\n`podmedic incidents approve {workflow.info().workflow_id} "
               f"node_quarantine --by NAME`")
    wf.note(f"node_quarantine needs approval: {action}; {on_timeout} after {timeout:g}s without an answer",
            "approval")
    if not await wait_for(lambda: wf.state.pending_approval is None, at_most_s=timeout,
                          summary=f"approval of node_quarantine ({on_timeout} after {timeout:g}s)"):
        wf.state.pending_approval = None
        wf.state.decisions.append(timed_out("node_quarantine", on_timeout, timeout))
        wf.note(f"no answer on node_quarantine within {timeout:g}s: {on_timeout}", "approval")
        return on_timeout == "proceed"
    wf.state.phase = "NodeIncident"
    wf.upsert("NodeIncident")
    return not wf.skipped()


async def _decline(wf: NodeContext, why: str) -> str:
    """No node quarantine: the covered devices get their own DeviceTaintRules, held by this incident."""
    if not await node_guard_permit.permit(wf):
        by = wf.resolution.by if wf.resolution else "an operator"
        return f"{why}; resolved by {by} while the fleet guard held the devices' taints"
    for device in _devices(wf.state):
        await workflow.execute_activity_method(
            TaintActivities.taint_device,
            TaintInput(incident_id=workflow.info().workflow_id, device=device, effect=Effect.NO_SCHEDULE,
                       reason=f"{why}; node incident taints its devices one by one"),
            summary=f"taint {device.resource_id} NoSchedule", start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY)
        wf.state.held_rules.append(device.object_name)
    if wf.state.devices:
        wf.note(f"{why}: devices tainted one by one instead ({', '.join(wf.state.devices)})", "quarantine")
    if wf.state.plugin_devices:
        wf.note(f"{why}: device-plugin devices {', '.join(wf.state.plugin_devices)} cannot be tainted one by one "
                "(the kubelet keeps them out of the node's allocatable only while they report Unhealthy)",
                "quarantine")
    return await _hold(wf, quarantined=False)


async def _hold(wf: NodeContext, *, quarantined: bool = True) -> str:
    """Wait for every device incident to close healthy, an operator's resolve, or the hold time."""
    q = wf.inp.quarantine
    what = f"node {wf.inp.node} quarantine" if quarantined else "devices' taints"
    deadline = workflow.now() + timedelta(seconds=q.hold_s)
    until = "every device incident closes healthy" if not wf.state.plugin_devices else _healed_why(wf.state)
    wf.state.doing = f"{what} held until {until} (at most {q.hold_s:g}s)"
    wf.state.release = release_terms(wf.inp.node, until, q.hold_s, deadline)
    wf.details(f"**{wf.state.phase}** — {wf.state.why}\n\n{wf.state.release}")
    while True:
        await wf.tell_devices()
        if wf.resolution is not None:
            return await _lift(wf, f"resolved by {wf.resolution.by}", quarantined)
        statuses = await workflow.execute_activity_method(
            NodeActivities.device_incidents_status, DeviceIncidentsInput(incidents=list(wf.state.incidents)),
            summary="are the device incidents closed healthy?", start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY)
        wf.state.healed = [s.incident_id for s in statuses if s.healthy]
        closed_bad = [f"{s.incident_id} ({s.outcome})" for s in statuses if not s.running and not s.healthy]
        healed = all(s.healthy for s in statuses)
        plugin_bad = await plugin_devices.still_unhealthy(wf) if wf.state.plugin_devices and healed else []
        if (statuses or wf.state.plugin_devices) and healed and not plugin_bad:
            return await _lift(wf, _healed_why(wf.state), quarantined)
        if statuses and not any(s.running for s in statuses) and not healed:
            return _keep(wf, f"device incident(s) closed without a healthy device: {', '.join(closed_bad)}", what)
        remaining = (deadline - workflow.now()).total_seconds()
        if remaining <= 0:
            open_ = [s.incident_id for s in statuses if s.running] + plugin_bad
            return _keep(wf, f"still open after {q.hold_s:g}s: {', '.join(open_)}", what)
        await wait_for(_changed(wf, len(wf.state.incidents) + len(wf.state.plugin_devices)),
                       at_most_s=min(q.poll_s, remaining), summary="poll the device incidents")


def _healed_why(state: NodeIncidentState) -> str:
    parts = ["every device incident closed with its device verified healthy"] if state.incidents else []
    if state.plugin_devices:
        parts.append("the node's allocatable counts every device-plugin device again")
    return " and ".join(parts)


def _changed(wf: NodeContext, known: int) -> Callable[[], bool]:
    """Wake the hold early for an operator's resolve or a newly covered device."""
    return lambda: wf.resolution is not None or len(wf.state.incidents) + len(wf.state.plugin_devices) > known


async def _lift(wf: NodeContext, why: str, quarantined: bool) -> str:
    if quarantined:
        result = await workflow.execute_activity_method(QuarantineActivities.lift_quarantine, _request(wf.inp, why),
                                                        summary=f"uncordon and untaint node {wf.inp.node}",
                                                        start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY)
        wf.state.quarantined = False
        wf.note(f"node {wf.inp.node}: {result.detail} ({why})", "quarantine")
    held = [d for d in _devices(wf.state) if d.object_name in wf.state.held_rules]
    released = await workflow.execute_activity_method(
        TaintActivities.release_taints, HoldTaintsInput(devices=held, reason=why),
        summary="release the devices' DeviceTaintRules", start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY)
    for device, r in zip(held, released, strict=False):
        wf.note(f"DeviceTaintRule {device.object_name}: {r.detail}", "quarantine")
    wf.state.held_rules = []
    return f"node incident over ({why}): {'quarantine lifted' if quarantined else 'device taints released'}"


def _keep(wf: NodeContext, why: str, what: str) -> str:
    wf.note(f"{what} kept: {why}", "quarantine")
    rules = f"; DeviceTaintRules still held: {', '.join(wf.state.held_rules)}" if wf.state.held_rules else ""
    how = (f"; lift it with `kubectl uncordon {wf.inp.node}` and remove the {wf.inp.quarantine.taint_key} taint"
           if wf.state.quarantined else "")
    return f"{what} KEPT for an operator: {why}{rules}{how}"
