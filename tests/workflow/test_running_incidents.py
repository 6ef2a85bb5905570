"""Which incidents run, by one visibility query (``activities/running_incidents.py``), against a real
dev server: its SQL visibility must take ``WorkflowId IN (...)`` as Temporal's list filter documents it."""

from __future__ import annotations

import uuid

import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities import running_incidents
from activities.running_incidents import running_among
from tests.helpers import assert_eventually


@workflow.defn(name="RunningProbe")
class RunningProbe:
    """Runs until ``finish``."""

    def __init__(self) -> None:
        self.done = False

    @workflow.signal
    def finish(self) -> None:
        """Let it complete."""
        self.done = True

    @workflow.run
    async def run(self) -> None:
        """Wait for ``finish``."""
        await workflow.wait_condition(lambda: self.done)


@pytest.mark.asyncio(loop_scope="session")
async def test_only_the_running_ones_are_named_in_chunks(dev_env: WorkflowEnvironment,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    client, queue = dev_env.client, f"running-{uuid.uuid4().hex[:6]}"
    monkeypatch.setattr(running_incidents, "CHUNK", 2)  # four quotable ids: two queries
    ids = [f"device/gpu.example.com/node-{n}/{queue}" for n in range(4)]
    async with Worker(client, task_queue=queue, workflows=[RunningProbe]):
        handles = [await client.start_workflow(RunningProbe.run, id=i, task_queue=queue) for i in ids[:3]]
        await handles[1].signal(RunningProbe.finish)  # running: ids 0 and 2, one in each query
        await handles[1].result()
        asked = [*ids, 'device/odd"name']  # ids[3] never started; a quote cannot be queried

        async def listed() -> None:
            assert await running_among(client, asked) == {ids[0], ids[2]}

        await assert_eventually(listed, timeout=15)
        for handle in (handles[0], handles[2]):
            await handle.signal(RunningProbe.finish)
            await handle.result()

        async def none_left() -> None:
            assert await running_among(client, asked) == set()

        await assert_eventually(none_left, timeout=15)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_server_without_the_list_names_none_so_each_is_described(
        time_skipping_env: WorkflowEnvironment) -> None:
    # The time-skipping test server answers ListWorkflowExecutions UNIMPLEMENTED.
    assert await running_among(time_skipping_env.client, ["device/gpu.example.com/node-0/gpu-0"]) == set()
