"""The bare baseline copies an incident's shape: as many activities and as many timers.

The issue defines the cost benchmark's baseline as "a bare workflow with the same activities and
timers"; ``benchmarks.fleet.shape_of`` reads both from an incident's history, and this runs the
bare workflow on a real (time-skipping) Temporal server and reads its history back the same way.
"""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from benchmarks.bare import BareInput, BareWorkflow, Shape, build_bare_worker
from benchmarks.fleet import shape_of

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.parametrize("shape", [Shape(activities=3, timers=2), Shape(activities=1)])
async def test_bare_workflow_runs_the_shape_it_is_given(time_skipping_env: WorkflowEnvironment, task_queue: str,
                                                        shape: Shape) -> None:
    client = time_skipping_env.client
    async with build_bare_worker(client, task_queue):
        handle = await client.start_workflow(BareWorkflow.run, BareInput(activities=shape.activities,
                                                                         timers=shape.timers),
                                             id=f"bare-shape-{task_queue}", task_queue=task_queue)
        await handle.result()
        assert shape_of(await handle.fetch_history()) == shape
