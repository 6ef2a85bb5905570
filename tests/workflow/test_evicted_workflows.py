"""Workflows evicted from a worker's cache are freed (``workers/worker/collector.py``).

A real dev server and a real worker with a two-workflow cache; ten workflows wait for a signal,
so each start evicts another, then each is signalled, replayed and completes (and is evicted
again). Every instance is counted while alive. The automatic collector is off, as good as the
worker's raised thresholds in a storm: without the sweep the evicted instances stay (the SDK
leaves each as a reference cycle), with it they are gone but the cached ones. The worker's own
runner counts the evictions the sweep waits for (``workers/worker/evictions.py``), in the sandbox too.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import Iterator

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.helpers import assert_eventually
from workers.worker.collector import sweep_cycles
from workers.worker.evictions import EVICTIONS
from workers.worker.options import workflow_runner

ALIVE: weakref.WeakSet[object] = weakref.WeakSet()
CREATED: list[object] = []  # a weak reference per instance ever made
CACHE = 2
WORKFLOWS = 10


@workflow.defn(name="EvictionProbe")
class EvictionProbe:
    """Waits for ``finish``; counted in ``ALIVE`` while its instance lives."""

    def __init__(self) -> None:
        self.finished = False
        ALIVE.add(self)
        CREATED.append(weakref.ref(self))

    @workflow.signal
    def finish(self) -> None:
        """Let the run complete."""
        self.finished = True

    @workflow.run
    async def run(self) -> None:
        """Wait for ``finish``."""
        await workflow.wait_condition(lambda: self.finished)


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    before = gc.get_threshold()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()  # the sweep's tune_gc froze the test process's objects
        gc.set_threshold(*before)
        gc.enable()


async def _run_all(client: Client, *, sandboxed: bool = False) -> None:
    queue = f"evict-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=queue, workflows=[EvictionProbe], max_cached_workflows=CACHE,
                      workflow_runner=workflow_runner(sandboxed)):
        handles = [await client.start_workflow(EvictionProbe.run, id=f"{queue}-{n}", task_queue=queue)
                   for n in range(WORKFLOWS)]
        if not sandboxed:  # the sandbox runs its own copy of this module: CREATED here stays empty
            await assert_eventually(lambda: _at_least(len(CREATED), WORKFLOWS), timeout=30)  # every one ran once
        for handle in handles:
            await handle.signal(EvictionProbe.finish)
        await asyncio.gather(*(handle.result() for handle in handles))


async def _at_least(have: int, want: int) -> None:
    assert have >= want, f"{have} workflow instances created, want {want}"


@pytest.mark.asyncio(loop_scope="session")
async def test_evicted_workflows_are_freed_by_the_sweep_not_before(dev_env: WorkflowEnvironment,
                                                                    collector_off: None) -> None:
    ALIVE.clear()
    CREATED.clear()
    await _run_all(dev_env.client)
    # The control: every run was evicted at least once (cache of 2), and no collection ran.
    assert len(ALIVE) > WORKFLOWS, f"only {len(ALIVE)} instances left without a collection: the SDK no longer " \
                                   "leaves evicted workflows as cycles, and workers/worker/collector.py's sweep may go"
    gc.collect()
    ALIVE.clear()
    CREATED.clear()
    # The same with the sweep on from the start, as the worker runs it (``gc.freeze`` then hides only
    # what was alive before).
    evicted = EVICTIONS.total()
    async with sweep_cycles(every_s=0.05, within_s=0.5) as sweeps:
        await _run_all(dev_env.client)
        await assert_eventually(lambda: _at_most(len(ALIVE), CACHE), timeout=10)
    assert sweeps.count >= 1 and sweeps.freed > 0 and len(CREATED) > WORKFLOWS
    # Every run was evicted when it completed, if not before.
    assert EVICTIONS.total() - evicted >= WORKFLOWS, EVICTIONS.total() - evicted


@pytest.mark.asyncio(loop_scope="session")
async def test_evictions_are_counted_in_the_sandbox_too(dev_env: WorkflowEnvironment) -> None:
    evicted = EVICTIONS.total()
    await _run_all(dev_env.client, sandboxed=True)
    assert EVICTIONS.total() - evicted >= WORKFLOWS, EVICTIONS.total() - evicted


async def _at_most(have: int, most: int) -> None:
    assert have <= most, f"{have} workflow instances still alive, the cache holds {most}"
