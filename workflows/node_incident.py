"""A node's watch: device failures on one node, escalated to a node incident when several
devices fail within the driver's correlation window.

One workflow per node (id ``node/<node>``), fed by the device incidents through an
activity (signal-with-start). It closes quietly after a whole window without reports.
What a node incident does to the node (cordon, node taint) is the recovery ladder's
decision; here it is opened, made findable, and every device incident is told.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from podmedic.models import FailureMode, TimelineEntry
    from podmedic.node import (
        NodeDeviceReport,
        NodeIncidentNotice,
        NodeIncidentOutcome,
        NodeIncidentState,
        NodeWatchInput,
        correlated,
    )
    from workflows import search


@workflow.defn(name="NodeIncident")
class NodeIncidentWorkflow:
    """Correlates one node's device failures."""

    @workflow.init
    def __init__(self, inp: NodeWatchInput) -> None:
        self.inp = inp
        self.reports: list[NodeDeviceReport] = []
        self.state = NodeIncidentState(node=inp.node)
        self._told: set[str] = set()
        self._seen = 0

    @workflow.signal
    def device_failed(self, report: NodeDeviceReport) -> None:
        """A device incident on this node classified its device as failed."""
        if any(r.incident_id == report.incident_id and r.observed_at == report.observed_at for r in self.reports):
            return  # the activity delivering it was retried
        self.reports.append(report)
        self._note(f"{report.device.resource_id}: {report.failure_mode.value} ({report.why})")

    @workflow.query
    def get_state(self) -> NodeIncidentState:
        """The watch as it is now."""
        return self.state

    @workflow.run
    async def run(self, inp: NodeWatchInput) -> NodeIncidentOutcome:
        """Escalate when enough devices fail together; close after a quiet window."""
        rule = inp.correlation
        workflow.set_current_details(f"**Watching** node {inp.node}: a node incident opens when "
                                     f"{rule.devices} devices fail within {rule.window_s:g}s")
        while True:
            self._seen = len(self.reports)
            group = correlated(self.reports, rule)
            if group:
                await self._escalate(group)
            try:
                await workflow.wait_condition(lambda: len(self.reports) > self._seen,
                                              timeout=timedelta(seconds=rule.window_s),
                                              timeout_summary="quiet window of the node watch")
            except TimeoutError:
                break
        self.state.phase = "Closed"
        self._upsert("Closed")
        devices = ", ".join(self.state.devices)
        explanation = (f"node incident: {len(self.state.devices)} devices failed together ({devices})"
                       if self.state.escalated else
                       f"no node incident: {len({r.device.resource_id for r in self.reports})} device(s) failed, "
                       f"fewer than {rule.devices} within {rule.window_s:g}s")
        self._note(explanation)
        return NodeIncidentOutcome(node=inp.node, escalated=self.state.escalated,
                                   devices=list(self.state.devices), explanation=explanation)

    async def _escalate(self, group: list[NodeDeviceReport]) -> None:
        new = [r for r in group if r.device.resource_id not in self.state.devices]
        for report in new:
            self.state.devices.append(report.device.resource_id)
            self.state.incidents.append(report.incident_id)
        if not self.state.escalated:
            self.state.escalated = True
            self.state.phase = "NodeIncident"
            self._upsert("NodeIncident")
            self._note(f"{len(group)} devices failed within {self.inp.correlation.window_s:g}s: "
                       f"node {self.inp.node} is the incident")
            workflow.set_current_details(f"**NodeIncident** — {len(self.state.devices)} devices of node "
                                         f"{self.inp.node} failed together: {', '.join(self.state.devices)}")
        notice = NodeIncidentNotice(incident_id=workflow.info().workflow_id, node=self.inp.node,
                                    devices=list(self.state.devices))
        for incident_id in self.state.incidents:
            if incident_id in self._told:
                continue
            self._told.add(incident_id)
            try:
                await workflow.get_external_workflow_handle(incident_id).signal("node_incident", notice)
            except FailureError:
                self._note(f"{incident_id} already closed; not told")

    def _upsert(self, phase: str) -> None:
        if not self.inp.search_attributes:
            return
        updates = [search.PHASE.value_set(phase)]
        if phase == "NodeIncident":
            updates.append(search.FAILURE_MODE.value_set(FailureMode.INFRASTRUCTURE.value))
        workflow.upsert_search_attributes(updates)

    def _note(self, message: str) -> None:
        self.state.timeline.append(TimelineEntry(at=workflow.now(), step="correlate", message=message))
