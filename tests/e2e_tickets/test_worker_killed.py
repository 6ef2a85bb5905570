"""One ticket per incident even when the worker dies between the backend receiving the create
and the activity completing: a real ``podmedic worker`` subprocess is SIGKILLed while the fake
backend holds its answer, a new worker takes over, and exactly one ticket exists."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.models import Outcome
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk
from podmedic_sim.vendors.jira import FakeJira
from podmedic_sim.vendors.servicenow import FakeServiceNow
from tests.e2e_tickets.conftest import SECRETS, WorkerProcess
from tests.e2e_tickets.helpers import (
    assert_no_secret,
    free_device,
    outcome,
    policy,
    replaced_and_seen_by_the_agent,
    vendor_word_taken,
)
from tests.helpers import assert_eventually
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _backend(kind: str, fakes: Any) -> tuple[Any, str]:
    if kind == "webhook":
        desk: Any = VendorDesk(secret=SECRETS["PODMEDIC_TICKET_SECRET"])
        return desk, f'url: "{await fakes(desk)}/tickets"'
    if kind == "jira":
        desk = FakeJira(project="GPU", email="bot@example.com", token=SECRETS["PODMEDIC_JIRA_TOKEN"])
        return desk, f'backend: jira, jira: {{url: "{await fakes(desk)}", project: GPU, email: bot@example.com}}'
    desk = FakeServiceNow(user="podmedic", password=SECRETS["PODMEDIC_SERVICENOW_PASSWORD"])
    return desk, f'backend: servicenow, servicenow: {{url: "{await fakes(desk)}", user: podmedic}}'


@pytest.mark.parametrize("kind", ["webhook", "jira", "servicenow"])
async def test_sigkill_between_create_and_record_files_one_ticket(
    dev_env: WorkflowEnvironment, sim: SimCluster, ingest: Any, fakes: Any, taken: set[str],
    worker_process: WorkerProcess, kind: str,
) -> None:
    client: Client = dev_env.client
    desk, settings = await _backend(kind, fakes)
    desk.hold_creates = True
    front = await ingest(policy(settings, ticket_timeout_s=2.5))
    device = free_device(sim, taken)
    worker_process.start()
    await front.fail(device)

    async def received() -> None:
        assert len(desk.tickets) == 1, (getattr(desk, "rejected", None), worker_process.tail())
    await assert_eventually(received, timeout=45)  # the backend has the ticket; its answer is held
    # The replacement starts now (only the killed one ever held this attempt), so its start-up
    # overlaps the attempt's start-to-close timeout; it retries the activity when that expires.
    replacement = worker_process.again()
    replacement.start()
    worker_process.kill()
    desk.hold_creates = False
    desk.release.set()  # the held answer goes to a dead connection: the worker never recorded it

    async def recorded() -> str:
        # The query may first go to the dead worker's sticky queue and wait there; without a
        # deadline it outlived assert_eventually's in CI, so each try is bounded and tried again.
        handle = client.get_workflow_handle(f"device/{device}")
        try:
            state = await handle.query(DeviceIncidentWorkflow.get_state, rpc_timeout=timedelta(seconds=5))
        except RPCError as err:
            raise AssertionError(f"query not answered yet: {err}; replacement: {replacement.tail()}") from err
        assert state.ticket_id, (state.phase, replacement.tail())
        return str(state.ticket_id)
    ticket_id = await assert_eventually(recorded, timeout=45, interval=0.5)

    assert list(desk.tickets) == [ticket_id], desk.tickets.keys()
    if kind == "webhook":
        assert desk.posts >= 2  # the retry did post again, and the Idempotency-Key found the first ticket
    else:
        assert desk.creates_received == 1  # the retry searched first and found the issue/record
    # The vendor resolves, then the swapped GPU is seen and verifies the resolution.
    if kind == "webhook":
        await desk._resolve(desk.tickets[ticket_id])
    else:
        await desk.resolve(ticket_id)
    await vendor_word_taken(client, device)
    await replaced_and_seen_by_the_agent(sim, front, device)
    result = await outcome(client, device)
    assert result.outcome is Outcome.RESOLVED_BY_VENDOR and result.ticket_id == ticket_id, result.explanation
    assert len(desk.tickets) == 1
    await assert_no_secret(client, device, list(SECRETS.values()), known=ticket_id)
