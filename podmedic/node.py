"""Node-level correlation: several devices of one node failing together are one node incident."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from podmedic.models import DeviceRef, FailureMode, TimelineEntry
from podmedic.policy import NodeCorrelation


def node_workflow_id(node: str) -> str:
    """The node's correlation workflow: one open per node."""
    return f"node/{node}"


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
    search_attributes: bool = True


class NodeReportInput(BaseModel):
    """Activity input: deliver ``report`` to the node's watch, opening it if needed."""

    watch: NodeWatchInput
    report: NodeDeviceReport


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
    timeline: list[TimelineEntry] = Field(default_factory=list)


class NodeIncidentOutcome(BaseModel):
    """How a node watch ended."""

    node: str
    escalated: bool
    devices: list[str]
    explanation: str


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
