"""A storm's turn-keeper: first asked first served, never more acting than the limit, a turn freed by a
close, by an incident found gone, and by one that ended without a word; carried across continue-as-new.

Real time-skipping server and the real ``ask_turn`` activity (it starts the keeper, as a storm
incident does); the incidents the keeper tells are faked under the real activity names (the whole
path with real incidents: tests/e2e_node/test_storm_turns_e2e.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.storm_turns import TurnActivities
from podmedic.domain.node import DeviceIncidentsInput, DeviceIncidentStatus
from podmedic.domain.storm_turns import AdmitInput, AdmitResult, TurnOver, TurnRequest, TurnsState, turns_workflow_id
from tests.helpers import assert_eventually
from tests.workflow.operator_helpers import own_time_skipping_env
from workflows.fleet import storm_turn_keeper
from workflows.fleet.storm_turn_keeper import StormTurnsWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """Its own time-skipping server: time is moved on by hand."""
    async for server in own_time_skipping_env():
        yield server


class FakeIncidents:
    """The incidents as the keeper reaches them: who was told their turn, in which batches; who ended."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.ended: set[str] = set()
        self.looks = 0

    @property
    def admitted(self) -> list[str]:
        return [i for batch in self.batches for i in batch]

    def activities(self) -> list[Any]:
        @activity.defn(name="admit_turns")
        async def admit_turns(inp: AdmitInput) -> AdmitResult:
            self.batches.append(inp.incident_ids)
            return AdmitResult(gone=[i for i in inp.incident_ids if i in self.ended])

        @activity.defn(name="device_incidents_status")
        async def device_incidents_status(inp: DeviceIncidentsInput) -> list[DeviceIncidentStatus]:
            self.looks += 1
            return [DeviceIncidentStatus(incident_id=i, running=i not in self.ended) for i in inp.incidents]

        return [admit_turns, device_incidents_status]


@contextlib.asynccontextmanager
async def _keeping(client: Client, task_queue: str, fake: FakeIncidents, driver: str) -> AsyncIterator[None]:
    """A worker for the keeper; the keeper goes with it (a timer of a keeper no worker serves would stop
    the time-skipping server's clock for the tests after)."""
    # Unsandboxed: a test lowers the module's continue-as-new threshold.
    async with Worker(client, task_queue=task_queue, workflows=[StormTurnsWorkflow], activities=fake.activities(),
                      workflow_runner=UnsandboxedWorkflowRunner()):
        yield
    with contextlib.suppress(RPCError):
        await client.get_workflow_handle(turns_workflow_id(driver)).terminate("test over")


async def _ask(client: Client, task_queue: str, driver: str, ids: list[str], acting: int) -> None:
    """Each incident asks as a fenced storm incident does: the real activity, on the worker's task queue."""
    asker = ActivityEnvironment()
    asker.info = dataclasses.replace(asker.info, task_queue=task_queue)
    for incident_id in ids:
        await asker.run(TurnActivities(client).ask_turn,
                        TurnRequest(incident_id=incident_id, driver=driver, acting=acting, search_attributes=False))


async def _done(client: Client, driver: str, incident_id: str) -> None:
    await client.get_workflow_handle(turns_workflow_id(driver)).signal(
        StormTurnsWorkflow.done, TurnOver(incident_id=incident_id, driver=driver))


async def _state(client: Client, driver: str) -> TurnsState:
    state: TurnsState = await client.get_workflow_handle_for(StormTurnsWorkflow.run, turns_workflow_id(driver)
                                                             ).query(StormTurnsWorkflow.get_state)
    return state


async def _admitted(fake: FakeIncidents, expected: list[str]) -> None:
    async def check() -> None:
        assert fake.admitted == expected

    await assert_eventually(check, timeout=15)


async def test_first_asked_first_served_and_never_more_than_the_limit_act(env: WorkflowEnvironment,
                                                                            task_queue: str) -> None:
    client, fake, driver = env.client, FakeIncidents(), "a.example.com"
    ids = [f"device/{driver}/node-1/gpu-{n}" for n in range(5)]
    async with _keeping(client, task_queue, fake, driver):
        await _ask(client, task_queue, driver, ids, acting=2)
        await _admitted(fake, ids[:2])
        # At the urgent task priority (podmedic/temporal/priorities.py): in a storm its tasks must not queue
        # behind the new incidents', or asks and turns given back pile up unread. (The dev server carries a
        # run's priority into the run it continues as; this test server does not.)
        started = (await client.get_workflow_handle(turns_workflow_id(driver)).fetch_history()).events[0]
        assert started.workflow_execution_started_event_attributes.priority.priority_key == 1
        await _ask(client, task_queue, driver, ids[:1], acting=2)  # asking again changes nothing
        assert (s := await _state(client, driver)).acting == 2 and s.waiting == 3, s
        await _done(client, driver, ids[0])
        await _admitted(fake, ids[:3])
        await _done(client, driver, ids[4])  # closed (aborted) before its turn: it leaves the queue
        await _done(client, driver, ids[1])
        await _admitted(fake, ids[:4])
        state = await _state(client, driver)
        assert (state.acting, state.waiting, state.admitted, state.closed) == (2, 0, 4, 2), state


async def test_an_incident_gone_at_its_turn_or_ended_without_a_word_frees_its_turn(env: WorkflowEnvironment,
                                                                                  task_queue: str) -> None:
    client, fake, driver = env.client, FakeIncidents(), "b.example.com"
    gone, silent, last = (f"device/{driver}/node-1/gpu-{n}" for n in range(3))
    fake.ended.add(gone)
    async with _keeping(client, task_queue, fake, driver):
        await _ask(client, task_queue, driver, [gone, silent, last], acting=1)
        await _admitted(fake, [gone, silent])  # the signal found no running incident: the turn is over
        fake.ended.add(silent)  # terminated: it never gives its turn back
        await env.sleep(timedelta(seconds=storm_turn_keeper.RECHECK_S / 2))
        assert fake.admitted == [gone, silent], "freed before the keeper looked"
        await env.sleep(timedelta(seconds=storm_turn_keeper.RECHECK_S))
        await _admitted(fake, [gone, silent, last])
        assert fake.looks >= 1
        assert (s := await _state(client, driver)).closed == 2, s


async def test_the_queue_survives_continue_as_new_and_the_keeper_ends_when_quiet(
        env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client, fake, driver = env.client, FakeIncidents(), "c.example.com"
    monkeypatch.setattr(storm_turn_keeper, "MAX_HISTORY_EVENTS", 25)
    ids = [f"device/{driver}/node-1/gpu-{n}" for n in range(12)]
    handle = client.get_workflow_handle_for(StormTurnsWorkflow.run, turns_workflow_id(driver))
    async with _keeping(client, task_queue, fake, driver):
        await _ask(client, task_queue, driver, ids, acting=1)
        for n, incident_id in enumerate(ids):
            await _admitted(fake, ids[:n + 1])
            await _done(client, driver, incident_id)
        started = (await handle.fetch_history()).events[0].workflow_execution_started_event_attributes
        assert started.continued_execution_run_id  # it continued as new, and no ask or turn was lost on the way
        state = await _state(client, driver)
        assert (state.admitted, state.closed, state.acting, state.waiting) == (12, 12, 0, 0), state
        await env.sleep(timedelta(seconds=storm_turn_keeper.QUIET_S + 10))
        ended = await handle.result()
        assert (ended.admitted, ended.closed) == (12, 12)
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
        await _ask(client, task_queue, driver, ["device/late"], acting=1)  # a later storm: a new keeper
        await _admitted(fake, [*ids, "device/late"])
        assert (await _state(client, driver)).admitted == 1
