"""Signalling a workflow that may have ended: one shape for the ingest and the activities.

A signal to a workflow id with no open run fails with ``NOT_FOUND``. For a Healthy event, a
permit or a storm turn given back, or an incident told its turn, that is an answer (nobody is
waiting for it), not an error; anything else the server says is raised as it came.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode


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
