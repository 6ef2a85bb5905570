"""Which of some incidents are running, by one visibility query instead of a describe each.

The node quarantine asks after its devices' incidents every poll, and in a storm so does every
pool fence: a fence per node in a hall-wide storm. A describe per incident decodes the whole
execution (memo, search attributes, pending activities): with the describes' round trips, a large
share of the worker's Python time in a storm (py-spy, docs/BENCHMARKS.md). One
``ListWorkflowExecutions`` per poll names the running ones; the answer is read raw, workflow ids
only. Visibility may lag the executions by moments: an incident that just closed can still be
listed running (its asker looks again next poll), one that just started may be missing (its
asker describes it, as before). A server without the list (the SDK's time-skipping test server)
or a visibility store that fails answers nothing running: every incident is then described.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

log = logging.getLogger("podmedic.activities.running_incidents")

CHUNK = 100
"""Workflow ids per query."""


def _quotable(workflow_id: str) -> bool:
    return '"' not in workflow_id and "\\" not in workflow_id


async def running_among(client: Client, workflow_ids: Sequence[str]) -> set[str]:
    """The ids among ``workflow_ids`` with a running execution, as visibility lists them now. An id that
    cannot be written into a query (a quote, a backslash) is never listed, nor any when the list fails:
    its caller describes it."""
    try:
        return await _listed_running(client, sorted({i for i in workflow_ids if _quotable(i)}))
    except RPCError as err:
        if err.status != RPCStatusCode.UNIMPLEMENTED:
            log.warning("listing running incidents failed, describing each instead: %s", err)
        return set()


class ClosedRun(NamedTuple):
    """An incident whose latest run is not running: how it closed (``completed``, ``terminated``,
    ... or ``not found``), that run's id and when it closed (``None`` when not found)."""

    status: str
    run_id: str | None
    closed_at: dt.datetime | None = None


async def closed_among(client: Client, workflow_ids: Sequence[str]) -> dict[str, ClosedRun]:
    """The ids among ``workflow_ids`` whose latest run is closed, or that have none. One visibility
    query names the running ones; each other id is described, so visibility's lag never calls a
    running incident closed."""
    running = await running_among(client, workflow_ids)
    closed: dict[str, ClosedRun] = {}
    for workflow_id in dict.fromkeys(workflow_ids):
        if workflow_id in running:
            continue
        try:
            desc = await client.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            closed[workflow_id] = ClosedRun("not found", None)
            continue
        if desc.status != WorkflowExecutionStatus.RUNNING:
            closed[workflow_id] = ClosedRun(desc.status.name.lower() if desc.status else "closed", desc.run_id,
                                            desc.close_time)
    return closed


def run_closed(client: Client) -> Callable[[str], Awaitable[bool]]:
    """A check of one incident run named ``<workflow id>@<run id>``: closed (or gone past retention)?"""
    async def closed(holder: str) -> bool:
        workflow_id, _, run_id = holder.partition("@")
        try:
            desc = await client.get_workflow_handle(workflow_id, run_id=run_id or None).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return True
        return desc.status != WorkflowExecutionStatus.RUNNING

    return closed


async def _listed_running(client: Client, ids: list[str]) -> set[str]:
    running: set[str] = set()
    for start in range(0, len(ids), CHUNK):
        names = ", ".join(f'"{i}"' for i in ids[start:start + CHUNK])
        query = f'ExecutionStatus = "Running" AND WorkflowId IN ({names})'
        token = b""
        while True:
            answer = await client.workflow_service.list_workflow_executions(ListWorkflowExecutionsRequest(
                namespace=client.namespace, query=query, page_size=CHUNK, next_page_token=token))
            running.update(e.execution.workflow_id for e in answer.executions)
            token = answer.next_page_token
            if not token:
                break
    return running
