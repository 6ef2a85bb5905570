"""Reaching a workflow from outside it, one shape for the ingest and the activities: signalling one that
may have ended, and starting the fleet guard unless one runs.

A signal to a workflow id with no open run fails with ``NOT_FOUND``. For a Healthy event, a
permit or a storm turn given back, or an incident told its turn, that is an answer (nobody is
waiting for it), not an error; anything else the server says is raised as it came.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain.fleet_guard.messages import GUARD_WORKFLOW_ID
from podmedic.temporal.priorities import URGENT


async def signal_if_open(client: Client, workflow_id: str, signal: Any, *args: Any) -> bool:
    """Send ``signal`` (a name or a signal method) with ``args`` to the open run of ``workflow_id``;
    False when it has none."""
    try:
        await client.get_workflow_handle(workflow_id).signal(signal, *args)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def open_run_id(client: Client, workflow_id: str) -> str | None:
    """The run id of ``workflow_id``'s latest run (the one a signal just reached)."""
    return (await client.get_workflow_handle(workflow_id).describe()).run_id


def guard_start(task_queue: str) -> dict[str, Any]:
    """``Client.start_workflow``'s keyword arguments that start the fleet guard unless one runs (its askers',
    and the ingest's with its ``sighted`` signal: ``workers/ingest/guard_sightings.py``)."""
    return {"id": GUARD_WORKFLOW_ID, "task_queue": task_queue, "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
            # Its tasks answer every incident's ask: in a storm they must not queue behind the new incidents'.
            "priority": URGENT, "static_summary": "fleet guard: blast-radius limits and storm breaker"}
