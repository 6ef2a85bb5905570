"""A node incident in sentences: why the node is the incident (which devices, which faults, when) and
what releases it. Shown in the Temporal UI's details and by ``podmedic incidents show node/<node>``."""

from __future__ import annotations

import datetime as dt

from podmedic.domain.node import NodeDeviceReport
from podmedic.domain.policy_detection import NodeCorrelation


def _at(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _device(report: NodeDeviceReport) -> str:
    why = f": {report.why}" if report.why else ""
    return f"{report.device.device} ({report.failure_mode.value}{why}; observed {_at(report.observed_at)})"


def why_node(node: str, reports: list[NodeDeviceReport], rule: NodeCorrelation, *,
             requested_by: list[str], plugin_devices: list[str]) -> str:
    """Why ``node`` is the incident: which devices failed, with which faults, when; or whose ladder or
    which device-plugin device made it one."""
    latest: dict[str, NodeDeviceReport] = {}
    for report in sorted(reports, key=lambda r: r.observed_at):
        latest[report.device.resource_id] = report
    parts = []
    if len(latest) >= rule.devices:
        parts.append(f"{len(latest)} devices failed within {rule.window_s:g}s (the policy's threshold is "
                     f"{rule.devices}): " + ", ".join(_device(r) for r in latest.values()))
    elif latest:
        parts.append("failed: " + ", ".join(_device(r) for r in latest.values()))
    if requested_by:
        parts.append(f"asked for by {', '.join(requested_by)} (the last rung of its recovery ladder)")
    if plugin_devices:
        parts.append(f"device-plugin device(s) {', '.join(plugin_devices)} failed, which no DeviceTaintRule "
                     "can select: the node is the only fence")
    return f"node {node} is the incident: " + "; ".join(parts) if parts else f"node {node}: no device failed"


def release_terms(node: str, until: str, hold_s: float, deadline: dt.datetime) -> str:
    """What lifts the quarantine, and what happens if nothing does."""
    return (f"lifted when {until}, or at once by `podmedic incidents resolve node/{node} --by NAME`; "
            f"if neither happens by {_at(deadline)} ({hold_s:g}s), it is kept for an operator")
