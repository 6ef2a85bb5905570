"""Correlation stage: a device incident reports its failure to its node's watch.

Signal-with-start by the node's workflow id, so the first failing device opens the watch
and the rest join it, whichever worker runs them; the watch drops a retried report. The
watch is then asked (a query sees every signal delivered before it) whether the device is
covered by a node incident, so the device incident knows before it taints anything; unless
the report opened the watch, which then knows of nothing else.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError

from activities.running_incidents import closed_among
from podmedic.domain import search
from podmedic.domain import workflow_names as names
from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import Outcome
from podmedic.domain.node import (
    DeviceIncidentsInput,
    DeviceIncidentStatus,
    NodeIncidentState,
    NodeReportInput,
    NodeReportResult,
    node_workflow_id,
)

# By name, not class: the node workflow itself runs these activities' siblings (no import cycle).

# A quiet watch answers in tens of milliseconds. A watch that cannot answer in 1 s is behind on its tasks
# (a storm): the incident goes on without the answer rather than wait for it and retry the whole activity
# (docs/BENCHMARKS.md has the storm figures that set this); the watch signals it later.
QUERY_TIMEOUT = dt.timedelta(seconds=1)

HEALTHY_OUTCOMES = {Outcome.RECOVERED_IN_PLACE, Outcome.RECOVERED_RESCHEDULED, Outcome.RESOLVED_BY_VENDOR,
                    Outcome.CLEARED}


class NodeActivities:
    """Activities that talk to Temporal itself rather than the cluster."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def _deliver(self, inp: NodeReportInput, signal: str) -> NodeReportResult:
        watch = inp.watch
        workflow_id = node_workflow_id(watch.node)
        handle = await self.client.start_workflow(
            names.NODE_INCIDENT,
            watch,
            id=workflow_id,
            task_queue=activity.info().task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal=signal,
            start_signal_args=[inp.report],
            search_attributes=search.for_node(watch.driver, watch.node) if watch.search_attributes else None,
            static_summary=f"node {watch.node}: watching for devices failing together",
        )
        if signal == "device_failed" and inp.watch.correlation.devices > 1 and _started_by(handle):
            # This report opened the watch, so the watch holds this report alone: no node incident, no other
            # failure. Most failures are a node's only one (Llama 3's 419 interruptions came one at a time);
            # the query would cost a workflow task on the worker and a round trip per incident.
            return NodeReportResult(watch_id=workflow_id)
        try:
            state = await handle.query("get_state", result_type=NodeIncidentState, rpc_timeout=QUERY_TIMEOUT)
        except RPCError as err:  # losing the answer only delays the device learning it: the watch signals it too
            activity.logger.warning("node watch %s did not answer: %s", workflow_id, err)
            return NodeReportResult(watch_id=workflow_id)
        return _answer(workflow_id, state, inp)

    @activity.defn(name="report_to_node")
    async def report_to_node(self, inp: NodeReportInput) -> NodeReportResult:
        """Deliver the report to ``node/<node>``; says whether a node incident covers the device."""
        return await self._deliver(inp, "device_failed")

    @activity.defn(name="request_node_quarantine")
    async def request_node_quarantine(self, inp: NodeReportInput) -> NodeReportResult:
        """The ladder's last rung: ask the node's watch to quarantine the node now."""
        return await self._deliver(inp, "quarantine_requested")

    @activity.defn(name="device_incidents_status")
    async def device_incidents_status(self, inp: DeviceIncidentsInput) -> list[DeviceIncidentStatus]:
        """Each device incident's latest run: running, or closed and how."""
        closed = await closed_among(self.client, inp.incidents)
        out: list[DeviceIncidentStatus] = []
        for incident_id in inp.incidents:
            run = closed.get(incident_id)
            if run is None:
                out.append(DeviceIncidentStatus(incident_id=incident_id, running=True))
                continue
            outcome, healthy = run.status, False
            if run.status == "completed":
                result = await self.client.get_workflow_handle(incident_id, run_id=run.run_id,
                                                               result_type=IncidentOutcome).result()
                outcome, healthy = result.outcome.value, result.outcome in HEALTHY_OUTCOMES
            out.append(DeviceIncidentStatus(incident_id=incident_id, running=False, outcome=outcome, healthy=healthy))
        return out


def _started_by(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the signal-with-start behind ``handle`` started a new run (the server's ``started``).

    The SDK keeps the server's answer (``SignalWithStartWorkflowExecutionResponse.started``) on the handle
    but offers no public name for it, and no temporalio/sdk-python issue asks for one yet (searched: "started",
    "signal with start"); the public way is the raw ``workflow_service`` call, which would re-implement
    ``start_workflow``'s conversions. The one private read is here; without it this says False and the caller
    asks the watch, which is only slower."""
    return getattr(getattr(handle, "_start_workflow_response", None), "started", False) is True


def _answer(workflow_id: str, state: NodeIncidentState, inp: NodeReportInput) -> NodeReportResult:
    resource_id, at = inp.report.device.resource_id, inp.report.observed_at
    covered = state.escalated and resource_id in state.devices
    window = dt.timedelta(seconds=inp.watch.correlation.window_s)
    others = sorted(d for d, seen in state.reported.items() if d != resource_id and abs(seen - at) <= window)
    return NodeReportResult(watch_id=workflow_id, node_incident=workflow_id if covered else None,
                            quarantined=state.quarantined, other_failures=others)
