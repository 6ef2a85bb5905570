"""Test helpers that follow a device's incidents in Temporal: the latest run, the next run's outcome."""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.service import RPCError

from podmedic.domain.incident import IncidentOutcome
from workflows.device.incident import DeviceIncidentWorkflow


async def last_run(client: Client, resource_id: str) -> str | None:
    """The run id of the device's latest incident, or ``None`` when it never had one."""
    try:
        return (await client.get_workflow_handle(f"device/{resource_id}").describe()).run_id
    except RPCError:
        return None


async def next_outcome(client: Client, resource_id: str, previous_run: str | None,
                       timeout_s: float = 120) -> IncidentOutcome:
    """The result of the device's incident opened after ``previous_run`` (by the ingest)."""
    for _ in range(300):
        run = await last_run(client, resource_id)
        if run is not None and run != previous_run:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"no incident opened for {resource_id}")
    handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{resource_id}", run_id=run)
    return await asyncio.wait_for(handle.result(), timeout=timeout_s)
