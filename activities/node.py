"""Correlation stage: a device incident reports its failure to its node's watch.

Signal-with-start by the node's workflow id, so the first failing device opens the watch
and the rest join it, whichever worker runs them; the watch drops a retried report.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from podmedic.node import NodeReportInput, node_workflow_id
from workflows import search
from workflows.node_incident import NodeIncidentWorkflow


class NodeActivities:
    """Activities that talk to Temporal itself rather than the cluster."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn(name="report_to_node")
    async def report_to_node(self, inp: NodeReportInput) -> str:
        """Deliver the report to ``node/<node>``; returns the watch's workflow id."""
        watch = inp.watch
        workflow_id = node_workflow_id(watch.node)
        await self.client.start_workflow(
            NodeIncidentWorkflow.run,
            watch,
            id=workflow_id,
            task_queue=activity.info().task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="device_failed",
            start_signal_args=[inp.report],
            search_attributes=search.for_node(watch.driver, watch.node) if watch.search_attributes else None,
            static_summary=f"node {watch.node}: watching for devices failing together",
        )
        return workflow_id
