"""Node-level correlation: several devices of one node failing together are one node incident."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.incident import Decision, PendingApproval
from podmedic.domain.models import DeviceRef, FailureMode, TimelineEntry
from podmedic.domain.models import node_workflow_id as node_workflow_id  # node-level callers look here
from podmedic.domain.policy import Approvals, DriverPolicy, NodeQuarantine
from podmedic.domain.policy_detection import NodeCorrelation


class NodeDeviceReport(BaseModel):
    """A device incident telling its node's watch that the device failed."""

    incident_id: str
    device: DeviceRef
    failure_mode: FailureMode
    observed_at: dt.datetime = Field(description="When the device's failure was observed (detector time).")
    why: str = ""


class NodeWatchInput(BaseModel):
    """Start argument of a node's watch: the rule in force when it opened."""

    node: str
    driver: str
    correlation: NodeCorrelation
    quarantine: NodeQuarantine = Field(default_factory=NodeQuarantine)
    approvals: Approvals = Field(default_factory=Approvals)
    search_attributes: bool = True
    guard: GuardPolicy | None = Field(None, description="The fleet guard the quarantine asks (None: none).")
    dry_run: bool = Field(False, description="Say what the quarantine would do; do nothing.")

    @classmethod
    def under(cls, node: str, driver: str, policy: DriverPolicy, *, search_attributes: bool) -> NodeWatchInput:
        """The watch of ``node`` with ``policy``'s correlation, quarantine, approvals and guard."""
        return cls(node=node, driver=driver, correlation=policy.detection.node_correlation,
                   quarantine=policy.node_quarantine, approvals=policy.approvals,
                   search_attributes=search_attributes, guard=policy.guard, dry_run=policy.dry_run)


class NodeReportInput(BaseModel):
    """Activity input: deliver ``report`` to the node's watch, opening it if needed."""

    watch: NodeWatchInput
    report: NodeDeviceReport


class NodeReportResult(BaseModel):
    """What the node's watch said back: the node incident covering the device, if any."""

    watch_id: str
    node_incident: str | None = None
    quarantined: bool = False
    other_failures: list[str] = Field(default_factory=list, description="Other devices of the node that failed "
                                                                        "within the correlation window of this report.")


class NodeIncidentNotice(BaseModel):
    """Sent to each device incident once its node is the incident."""

    incident_id: str
    node: str
    devices: list[str]


class NodeIncidentState(BaseModel):
    """A node watch as it is now (``get_state`` query)."""

    node: str
    phase: str = "Watching"
    escalated: bool = False
    devices: list[str] = Field(default_factory=list)
    incidents: list[str] = Field(default_factory=list)
    quarantined: bool = Field(False, description="The node is cordoned and tainted by this incident now.")
    quarantine_requested_by: list[str] = Field(default_factory=list,
                                               description="Device incidents whose ladder asked for the quarantine.")
    healed: list[str] = Field(default_factory=list, description="Devices whose incidents closed healthy.")
    plugin_devices: list[str] = Field(default_factory=list,
                                      description="Device-plugin devices reported failed (<resource>/<device ID>).")
    plugin_healthy: list[str] = Field(default_factory=list,
                                      description="Of those, the ones a pod has since reported Healthy.")
    held_rules: list[str] = Field(default_factory=list, description="DeviceTaintRules this incident holds.")
    why: str = Field("", description="Why the node is the incident: which devices, which faults, when.")
    reported: dict[str, dt.datetime] = Field(default_factory=dict, description="Each device reported failed to "
                                                                              "the watch, and when it was observed.")
    release: str = Field("", description="What lifts the quarantine, and what happens if nothing does.")
    pending_approval: PendingApproval | None = None
    decisions: list[Decision] = Field(default_factory=list)
    doing: str = ""
    timeline: list[TimelineEntry] = Field(default_factory=list)


class NodeIncidentOutcome(BaseModel):
    """How a node watch ended."""

    node: str
    escalated: bool
    devices: list[str]
    explanation: str
    quarantined: bool = Field(False, description="The node was still quarantined when the incident closed.")


class HoldTaintsInput(BaseModel):
    """DeviceTaintRules of these devices, to hold or release for a node incident."""

    devices: list[DeviceRef]
    reason: str


class QuarantineInput(BaseModel):
    """Cordon and taint a node for a node incident, or undo it."""

    node: str
    incident_id: str
    cordon: bool
    taint_key: str
    effect: str
    reason: str


class QuarantineResult(BaseModel):
    """What the node looks like now, as far as the quarantine goes."""

    node_found: bool
    changed: bool
    detail: str


class PluginCapacityInput(BaseModel):
    """Activity input: how many of the node's device-plugin devices are healthy, per resource."""

    node: str
    resources: list[str]


class PluginCapacity(BaseModel):
    """A node's extended resources as its status shows them: the kubelet counts every device the
    plugin lists in capacity and only the healthy ones in allocatable (pkg/kubelet/cm/devicemanager
    manager.go, ``GetCapacity``), so the two are equal once every device is healthy again."""

    node_found: bool
    capacity: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, str] = Field(default_factory=dict)

    def unhealthy(self, resource: str) -> int | None:
        """Devices of ``resource`` not healthy now (None when the node does not list the resource)."""
        try:
            return int(self.capacity[resource]) - int(self.allocatable.get(resource, "0"))
        except (KeyError, ValueError):
            return None


class DeviceIncidentsInput(BaseModel):
    """Device incidents (workflow ids) whose latest runs the node incident looks at."""

    incidents: list[str]


class DeviceIncidentStatus(BaseModel):
    """One device incident's latest run: still running, or closed with an outcome."""

    incident_id: str
    running: bool
    outcome: str | None = None
    healthy: bool = Field(False, description="Closed with the device verified healthy or fixed by the vendor.")


def correlated(reports: list[NodeDeviceReport], rule: NodeCorrelation) -> list[NodeDeviceReport]:
    """The latest report of each device failed within ``rule.window_s`` of the newest report,
    when there are at least ``rule.devices`` of them; else empty."""
    if not reports:
        return []
    newest = max(r.observed_at for r in reports)
    start = newest - dt.timedelta(seconds=rule.window_s)
    latest: dict[str, NodeDeviceReport] = {}
    for report in sorted(reports, key=lambda r: r.observed_at):
        if report.observed_at >= start:
            latest[report.device.resource_id] = report
    return list(latest.values()) if len(latest) >= rule.devices else []
