"""Connecting to Temporal and delivering health events to incidents."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from podmedic.models import DeviceHealthEvent, Health, IncidentInput
from podmedic.policy_file import PolicySet
from workflows import search
from workflows.incident import DeviceIncidentWorkflow

DEFAULT_TASK_QUEUE = "podmedic"

async def connect(address: str, namespace: str = "default") -> Client:
    """A client that speaks podmedic's pydantic models."""
    return await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)


async def deliver_event(
    client: Client,
    event: DeviceHealthEvent,
    policies: PolicySet,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    search_attributes: bool = True,
) -> str | None:
    """Deliver one event to its device's incident; returns the run id, or ``None`` when a
    Healthy event finds no open incident (nothing to do).

    Unhealthy and Unknown events use signal-with-start: an open incident receives the
    signal, otherwise a new run opens with the driver's policy as in force now. Healthy
    events only signal an open incident: good news never opens one.
    """
    device = event.device
    if event.health is Health.HEALTHY:
        handle = client.get_workflow_handle(device.workflow_id)
        try:
            await handle.signal(DeviceIncidentWorkflow.health_event, event)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return handle.result_run_id
    policy = policies.for_driver(device.driver)
    handle = await client.start_workflow(
        DeviceIncidentWorkflow.run,
        IncidentInput(device=device, policy=policy, search_attributes=search_attributes),
        id=device.workflow_id,
        task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal="health_event",
        start_signal_args=[event],
        search_attributes=search.initial(device.driver, device.resource_id, event.node)
        if search_attributes else None,
        static_summary=f"{device.resource_id} {event.health.value}: {event.reason or event.message}"[:200],
    )
    return handle.result_run_id
