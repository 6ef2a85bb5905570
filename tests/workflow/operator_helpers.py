"""Helpers shared by the operator workflow tests: open an incident, wait for a phase, call updates.

These tests run on their own time-skipping server (``own_time_skipping_env``): after an
update the Java test server stops skipping time on its own for the rest of its life
(temporalio/features#551), which must not leak into the other suites' shared server.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from podmedic.domain.incident import IncidentOutcome, IncidentState, Phase
from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_file import PolicySet
from podmedic.temporal.converter import podmedic_data_converter
from tests.helpers import SERVER_STARTUP_TIMEOUT, assert_eventually
from tests.workflow.fakes import FakeCluster, event, incident_worker
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow

Handle = WorkflowHandle[DeviceIncidentWorkflow, IncidentOutcome]


async def own_time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server for one test module (wrap it in a module-scoped fixture)."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
        data_converter=podmedic_data_converter, test_server_startup_timeout=SERVER_STARTUP_TIMEOUT)
    yield env
    await env.shutdown()


def worker(client: Client, task_queue: str, fake: FakeCluster) -> Worker:
    """A worker with the incident workflow and the fake cluster."""
    return incident_worker(client, task_queue, [DeviceIncidentWorkflow], fake.activities())


async def open_incident(client: Client, task_queue: str, device: DeviceRef, policy: PolicySet,
                        code: int | None = 79) -> Handle:
    """Deliver one Unhealthy event; the incident's handle."""
    await deliver_event(client, event(code=code, device=device, event_id=f"{device.device}-1"), policy,
                        task_queue=task_queue, search_attributes=False)
    return client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id)


async def state_in(handle: Handle, phase: Phase, timeout: float = 30) -> IncidentState:
    """Query until the incident is in ``phase``."""
    async def check() -> IncidentState:
        state = await handle.query(DeviceIncidentWorkflow.get_state)
        assert state.phase is phase, f"phase {state.phase.value}, waiting for {phase.value}"
        return state

    return await assert_eventually(check, timeout=timeout)


async def rejected(handle: Handle, update: Any, arg: Any) -> str:
    """Call an update that must be rejected; the validator's reason."""
    try:
        await handle.execute_update(update, arg)
    except WorkflowUpdateFailedError as err:
        return str(err.cause)
    raise AssertionError(f"update {update} with {arg!r} was accepted")


async def outcome_of(env: WorkflowEnvironment, handle: Handle, *, step: timedelta = timedelta(minutes=5),
                     rounds: int = 40) -> IncidentOutcome:
    """The incident's outcome, skipping time explicitly.

    After an update the Java test server no longer skips time while the client waits on
    the result (temporalio/features#551, sdk-java#2283), so time is moved on by hand.
    """
    for _ in range(rounds):
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return await handle.result()
        await env.sleep(step)
    raise AssertionError(f"{handle.id} still running after {rounds} x {step}")
