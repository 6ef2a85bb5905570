"""A device incident opened in a storm: fenced first, then ``Throttled`` until its turn; when the keeper
is gone (terminated) its next ask starts a new one, which lets it on.

Time-skipping server, the real keeper (``StormTurns``) and its real activities (signals through
Temporal); the cluster is faked under the real activity names (the whole path against the
simulator: tests/e2e_node/test_storm_turns_e2e.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.storm_turns import TurnActivities
from podmedic.domain.incident import AbortRequest, IncidentOutcome, Phase
from podmedic.domain.models import DeviceRef, Health
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.storm_turns import turns_workflow_id
from tests.workflow.fakes import FakeCluster, event, incident_worker
from tests.workflow.operator_helpers import outcome_of, own_time_skipping_env, state_in
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.fleet.storm_turn_keeper import StormTurnsWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

DRIVER = "gpu.nvidia.com"
MAX_HOLD_S = 600
POLICY = parse_policy(f"""
drivers:
  default:
    detection: {{storm_fence: {{acting: 1, max_hold_s: {MAX_HOLD_S}}}}}
    close: {{anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}}
    ticket: {{url: "http://tickets.invalid", wait_resolution_s: 3600, poll_s: 30}}
    classification: {{codes: {{permanent: [79]}}}}
""")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """Its own time-skipping server: time is moved on by hand, and the keeper is one per driver."""
    async for server in own_time_skipping_env():
        yield server


async def _storm_incident(client: Client, task_queue: str, n: int
                          ) -> WorkflowHandle[DeviceIncidentWorkflow, IncidentOutcome]:
    device = DeviceRef(driver=DRIVER, pool="node-0", device=f"gpu-{n}")
    await deliver_event(client, event(code=79, device=device, event_id=f"storm-{n}"), POLICY,
                        task_queue=task_queue, search_attributes=False, storm=True)
    return client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id)


async def test_a_storm_incident_waits_fenced_for_its_turn_and_asks_a_new_keeper_when_the_old_is_gone(
        env: WorkflowEnvironment, task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"  # each incident waits for its vendor: it keeps its turn
    turns = TurnActivities(client)
    keeper = client.get_workflow_handle_for(StormTurnsWorkflow.run, turns_workflow_id(DRIVER))
    async with incident_worker(client, task_queue, [DeviceIncidentWorkflow, StormTurnsWorkflow],
                               [*fake.activities(), turns.ask_turn, turns.give_back_turn, turns.admit_turns]):
        first = await _storm_incident(client, task_queue, 0)
        await state_in(first, Phase.AWAITING_VENDOR)
        second = await _storm_incident(client, task_queue, 1)
        waiting = await state_in(second, Phase.THROTTLED)
        assert waiting.taint_rule, waiting.timeline  # fenced before it waits: no new pod gets the device
        assert "waiting for its turn" in waiting.timeline[-1].message, waiting.timeline

        await keeper.terminate("an operator ended the keeper")
        await env.sleep(timedelta(seconds=MAX_HOLD_S / 2))
        assert (await second.query(DeviceIncidentWorkflow.get_state)).phase is Phase.THROTTLED
        await env.sleep(timedelta(seconds=MAX_HOLD_S))
        admitted = await state_in(second, Phase.AWAITING_VENDOR)
        lines = [e.message for e in admitted.timeline if e.step == "storm"]
        assert len(lines) == 3 and lines[0].startswith(f"fenced (DeviceTaintRule {waiting.taint_rule})"), lines
        assert lines[1].startswith(f"no turn yet after {MAX_HOLD_S}s: asked again"), lines
        assert lines[2].startswith("its turn came after"), lines

        for handle in (first, second):
            await handle.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="ops", reason="test over"))
            await outcome_of(env, handle)
        assert (await keeper.query(StormTurnsWorkflow.get_state)).closed == 1  # the new keeper's one turn came back
        with contextlib.suppress(RPCError):
            await keeper.terminate("test over")
