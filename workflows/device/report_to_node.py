"""Telling the device's node watch about a failure, so several failing devices become one node incident."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.node import NodeActivities
    from podmedic.domain.models import DeviceHealthEvent
    from podmedic.domain.node import NodeDeviceReport, NodeReportInput, NodeWatchInput
    from workflows.activity_options import URGENT
    from workflows.context import IncidentContext


async def report_to_node(wf: IncidentContext, event: DeviceHealthEvent) -> None:
    """Tell the node's watch; losing this only loses correlation, never the incident."""
    node = event.node or wf.inp.device.pool
    if not node or wf.state.failure_mode is None:
        return
    if wf.state.failure_mode.blames_the_workload:
        wf.note("correlate", f"not reported to node {node}'s watch: the workload caused this fault "
                               f"({wf.state.failure_mode}), which says nothing about the node")
        return
    if wf.policy.dry_run:  # the node's watch would cordon and taint the node on correlation
        wf.note("correlate", f"dry-run: not reported to node {node}'s watch (it would quarantine the node "
                               f"when {wf.policy.detection.node_correlation.devices} devices fail together)")
        return
    report = NodeDeviceReport(incident_id=wf.state.incident_id, device=wf.inp.device,
                              failure_mode=wf.state.failure_mode, observed_at=event.observed_at,
                              why=wf.state.why)
    watch = NodeWatchInput.under(node, wf.inp.device.driver, wf.policy, search_attributes=wf.inp.search_attributes)
    try:
        answer = await workflow.execute_activity_method(
            NodeActivities.report_to_node, NodeReportInput(watch=watch, report=report),
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=5)),
            summary=f"report to node {node}'s watch",
            priority=URGENT,
        )
    except ActivityError as err:
        wf.note("correlate", f"node {node} not told (correlation skipped): {err.cause or err}")
        return
    if answer.other_failures:
        wf.state.node_failures = answer.other_failures
        wf.note("correlate", f"node {node} had other devices fail within "
                             f"{wf.policy.detection.node_correlation.window_s:g}s: {', '.join(answer.other_failures)}")
    if answer.node_incident and wf.state.node_incident is None:
        wf.state.node_incident = answer.node_incident
        wf.note("correlate", f"part of node incident {answer.node_incident}")
