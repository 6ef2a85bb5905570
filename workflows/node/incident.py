"""A node's watch: device failures on one node, escalated to a node incident when several
devices fail within the driver's correlation window (or a device's ladder asks for it), or at
once when a device plugin's device fails (``workflows/node/plugin_devices.py``: no DeviceTaintRule can
select it, so the node is the fence).

One workflow per node (id ``node/<node>``), fed by the device incidents through an
activity (signal-with-start). Without an escalation it closes quietly after a whole window
without reports. A node incident quarantines the node (``workflows/node/quarantine.py``):
cordon and node taint, behind the ``node_quarantine`` approval gate when the policy says
so, and holds its devices' DeviceTaintRules; it lifts all of it once every device incident
closed with its device verified healthy, or an operator resolves it, and otherwise keeps it
and says so. Escalation is decided in the signal handler, so a query right after a report
already says whether the device is covered.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from podmedic.domain import search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.incident import ApprovalRequest, OperatorAnswer, Phase, Resolution, SkipRequest
    from podmedic.domain.models import FailureMode, PluginDevice, TimelineEntry
    from podmedic.domain.node import (
        NodeDeviceReport,
        NodeIncidentNotice,
        NodeIncidentOutcome,
        NodeIncidentState,
        NodeWatchInput,
        correlated,
    )
    from podmedic.domain.node_explain import why_node
    from workflows import operator_checks
    from workflows.node import plugin_devices, quarantine
    from workflows.operator_checks import decision, require_actor, require_pending, require_unresolved, with_note
    from workflows.waiting import node_guard_permit
    from workflows.waiting.wait import WaitState, wait_for

_PHASES = {"Watching": Phase.WATCHING, "AwaitingApproval": Phase.AWAITING_APPROVAL, "Closed": Phase.CLOSED}


@workflow.defn(name=names.NODE_INCIDENT)
class NodeIncidentWorkflow:
    """Correlates one node's device failures and quarantines the node when they are one incident."""

    @workflow.init
    def __init__(self, inp: NodeWatchInput) -> None:
        self.inp = inp
        self.reports: list[NodeDeviceReport] = []
        self.state = NodeIncidentState(node=inp.node)
        self.resolution: Resolution | None = None
        self._told: set[str] = set()
        self.plugin_reports: list[PluginDevice] = []
        self._pods_told: set[str] = set()
        self._seen = 0
        self.waits = WaitState()

    # -- device incidents ------------------------------------------------------------------
    @workflow.signal
    def device_failed(self, report: NodeDeviceReport) -> None:
        """A device incident on this node classified its device as failed."""
        if self._add(report):
            self._note(f"{report.device.resource_id}: {report.failure_mode.value} ({report.why})")
            group = correlated(self.reports, self.inp.correlation)
            if self.state.escalated:
                self._cover([report])
            elif group:
                self._cover(group)
                self._note(f"{len(group)} devices failed within {self.inp.correlation.window_s:g}s: "
                           f"node {self.inp.node} is the incident")

    @workflow.signal(name=names.PLUGIN_DEVICE_FAILED)
    def plugin_device_failed(self, report: PluginDevice) -> None:
        """A pod reports a device plugin's device Unhealthy: the node is the incident at once."""
        if any(r.event_id == report.event_id for r in self.plugin_reports):
            return
        self.plugin_reports.append(report)
        if report.name in self.state.plugin_healthy:
            self.state.plugin_healthy.remove(report.name)
        if report.name not in self.state.plugin_devices:
            self.state.plugin_devices.append(report.name)
            self._note(plugin_devices.failed_note(report))
        self._escalate()

    @workflow.signal(name=names.PLUGIN_DEVICE_HEALTHY)
    def plugin_device_healthy(self, report: PluginDevice) -> None:
        """A pod reports a device plugin's device Healthy again (the lift still waits for the node's
        allocatable to count every device)."""
        if report.name in self.state.plugin_devices and report.name not in self.state.plugin_healthy:
            self.state.plugin_healthy.append(report.name)
            self._note(f"{report.name} (device plugin) reported Healthy again by pod "
                       f"{report.pod.namespace}/{report.pod.name}")

    @workflow.signal
    def guard_wake(self) -> None:
        """The fleet guard has room again: ask it now."""
        self.waits.guard_woke = True

    @workflow.signal
    def quarantine_requested(self, report: NodeDeviceReport) -> None:
        """A device incident's ladder reached its ``node_quarantine`` rung."""
        if report.incident_id not in self.state.quarantine_requested_by:
            self.state.quarantine_requested_by.append(report.incident_id)
            self._note(f"{report.incident_id} asks for the node to be quarantined (its ladder's last rung)")
        self._add(report)
        if not self.state.escalated:
            self._note(f"node {self.inp.node} is the incident: {report.incident_id}'s ladder asked for it")
        self._cover([report])

    def _add(self, report: NodeDeviceReport) -> bool:
        if any(r.incident_id == report.incident_id and r.observed_at == report.observed_at for r in self.reports):
            return False  # the activity delivering it was retried
        self.reports.append(report)
        known = self.state.reported.get(report.device.resource_id)
        if known is None or report.observed_at > known:
            self.state.reported[report.device.resource_id] = report.observed_at
        return True

    def _cover(self, group: list[NodeDeviceReport]) -> None:
        for report in group:
            if report.device.resource_id not in self.state.devices:
                self.state.devices.append(report.device.resource_id)
            if report.incident_id not in self.state.incidents:
                self.state.incidents.append(report.incident_id)
        self._escalate()

    def _escalate(self) -> None:
        if not self.state.escalated:
            self.state.escalated = True
            self.state.phase = "NodeIncident"
        covered = [r for r in self.reports if r.incident_id in self.state.incidents]
        self.state.why = why_node(self.inp.node, covered, self.inp.correlation,
                                  requested_by=self.state.quarantine_requested_by,
                                  plugin_devices=self.state.plugin_devices)

    # -- operators ---------------------------------------------------------------------------
    @workflow.update
    def approve(self, request: ApprovalRequest) -> OperatorAnswer:
        """Approve the quarantine the node incident waits on."""
        return self._answer(operator_checks.approve(self.state, request))

    @approve.validator
    def _validate_approve(self, request: ApprovalRequest) -> None:
        require_actor(request.by)
        require_pending(self.state.pending_approval, request.step, phase=self.state.phase,
                        subject="the node incident")

    @workflow.update
    def skip(self, request: SkipRequest) -> OperatorAnswer:
        """Do not quarantine the node (the devices stay tainted one by one)."""
        self._decide(request.step, "skipped", request.by, request.reason)
        self.state.pending_approval = None
        return self._answer(f"{request.step} will be skipped ({request.by}: {request.reason or 'no reason'})")

    @skip.validator
    def _validate_skip(self, request: SkipRequest) -> None:
        require_actor(request.by)
        if request.step != "node_quarantine":
            raise ValueError(f"a node incident can only skip 'node_quarantine', not {request.step!r}")
        if self.state.quarantined or self.skipped():
            raise ValueError("node_quarantine already ran or was skipped")

    @workflow.update(name=names.RESOLVE)
    def resolve_update(self, resolution: Resolution) -> OperatorAnswer:
        """The node was repaired: lift the quarantine now."""
        self.resolution = resolution
        self._decide("resolve", "resolved", resolution.by, resolution.note)
        return self._answer(with_note(f"resolved by {resolution.by}", resolution.note))

    @resolve_update.validator
    def _validate_resolve(self, resolution: Resolution) -> None:
        require_actor(resolution.by)
        if self.state.phase == "Closed":
            raise ValueError(f"node incident {self.inp.node} is closed")
        require_unresolved(self.resolution)

    @workflow.query
    def get_state(self) -> NodeIncidentState:
        """The watch as it is now."""
        return self.state

    # -- the watch -------------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: NodeWatchInput) -> NodeIncidentOutcome:
        """Escalate when enough devices fail together; close after a quiet window, or after the
        node incident is over."""
        rule = inp.correlation
        self.details(f"**Watching** node {inp.node}: a node incident opens when "
                     f"{rule.devices} devices fail within {rule.window_s:g}s")
        while not self.state.escalated:
            self._seen = len(self.reports)
            if not await wait_for(lambda: self.state.escalated or len(self.reports) > self._seen,
                                  at_most_s=rule.window_s, summary="quiet window of the node watch"):
                break
        if not self.state.escalated:
            explanation = (f"no node incident: {len({r.device.resource_id for r in self.reports})} device(s) "
                           f"failed, fewer than {rule.devices} within {rule.window_s:g}s")
            return self._close(explanation)
        self.upsert("NodeIncident")
        self.details(f"**NodeIncident** — {self.state.why}")
        await self.tell_devices()
        # Shielded, as the device incident's work: a cancel request reaches this await whatever the
        # quarantine is waiting on, and the incident closes here.
        work = asyncio.create_task(quarantine.run(self))
        try:
            explanation = await asyncio.shield(work)
        except asyncio.CancelledError:
            work.cancel()
            kept = (f"node {inp.node} stays cordoned and tainted, its devices' DeviceTaintRules held, for an operator"
                    if self.state.quarantined else f"node {inp.node} was not quarantined")
            explanation = f"canceled from Temporal (a cancel request) in phase {self.state.phase}: {kept}"
        await node_guard_permit.release(self)
        return self._close(explanation)

    def _close(self, explanation: str) -> NodeIncidentOutcome:
        self.state.phase = "Closed"
        self.state.doing = f"closed: {explanation}"
        self.upsert("Closed")
        self._note(explanation)
        self.details(f"**Closed** — {explanation}")
        return NodeIncidentOutcome(node=self.inp.node, escalated=self.state.escalated,
                                   devices=self.failed(), explanation=explanation,
                                   quarantined=self.state.quarantined)

    async def tell_devices(self) -> None:
        """Tell every device incident not yet told that its node is the incident, and every pod holding a
        failed device-plugin device what happened."""
        for report in list(self.plugin_reports):
            if f"{report.pod.uid}/{report.name}" not in self._pods_told:
                self._pods_told.add(f"{report.pod.uid}/{report.name}")
                if self.inp.dry_run:
                    self.note(f"dry-run: pod {report.pod.namespace}/{report.pod.name} not told", "notify")
                else:
                    await plugin_devices.tell_pod(self, report)
        notice = NodeIncidentNotice(incident_id=workflow.info().workflow_id, node=self.inp.node,
                                    devices=list(self.state.devices))
        for incident_id in list(self.state.incidents):
            if incident_id in self._told:
                continue
            self._told.add(incident_id)
            try:
                await workflow.get_external_workflow_handle(incident_id).signal("node_incident", notice)
            except FailureError:
                self._note(f"{incident_id} already closed; not told")

    # -- helpers ---------------------------------------------------------------------------------
    def failed(self) -> list[str]:
        """Every failed device of the incident: DRA devices and device-plugin devices."""
        return self.state.devices + self.state.plugin_devices

    def skipped(self) -> bool:
        """Whether an operator skipped the node's quarantine."""
        return any(d.step == "node_quarantine" and d.decision == "skipped" for d in self.state.decisions)

    def _decide(self, step: str, what: str, by: str, note: str) -> None:
        self.state.decisions.append(decision(step, what, by, note))

    def _answer(self, accepted: str) -> OperatorAnswer:
        self._note(accepted)
        phase = _PHASES.get(self.state.phase, Phase.RECOVERING)
        return OperatorAnswer(incident_id=workflow.info().workflow_id, accepted=accepted, phase=phase)

    def details(self, text: str) -> None:
        """The node incident's current details in the Temporal UI."""
        workflow.set_current_details(text)

    def upsert(self, phase: str, awaiting: str | None = None) -> None:
        """Mirror the phase (and a pending approval) into the search attributes."""
        if not self.inp.search_attributes:
            return
        updates = [search.PHASE.value_set(phase),
                   search.AWAITING_APPROVAL.value_set(awaiting) if awaiting else search.AWAITING_APPROVAL.value_unset()]
        if phase == "NodeIncident":
            updates.append(search.FAILURE_MODE.value_set(FailureMode.INFRASTRUCTURE.value))
        workflow.upsert_search_attributes(updates)

    def note(self, message: str, step: str = "node") -> None:
        """Add a line to the node incident's timeline."""
        self.state.timeline.append(TimelineEntry(at=workflow.now(), step=step, message=message))

    def _note(self, message: str) -> None:
        self.note(message, "correlate")
