"""The bare Temporal baseline: a workflow of K trivial activities and T timers, on the same server as podmedic.

``python -m benchmarks.bare --address A --task-queue Q`` runs its worker in a process of its
own (as podmedic's worker runs in its own), with the same worker options, so that the ratio
podmedic/bare measures what podmedic adds on top of Temporal and nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import time
import uuid
from datetime import timedelta
from typing import Any, NamedTuple

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from benchmarks.stats import percentile, rate
from podmedic.temporal.connect import connect
from workers.worker.collector import sweep_cycles
from workers.worker.options import worker_options

TASK_QUEUE = "bench-bare"


TIMER_S = 0.01
"""How long each of the bare workflow's timers waits: a timer's cost to the worker is its workflow task
when it fires, whatever it waits, so the baseline keeps its timers short and the benchmark quick."""


class Shape(NamedTuple):
    """What one incident ran (its warm-up's history, ``benchmarks.fleet.shape_of``): the bare workflow
    runs as many activities and as many timers, so the ratio to it is what podmedic adds to Temporal."""

    activities: int
    timers: int = 0


class BareInput(BaseModel):
    """How many trivial activities the workflow runs, one after the other, and how many timers after them."""

    activities: int
    timers: int = 0


@activity.defn(name="BareNoop")
async def noop(step: int) -> int:
    """Does nothing: the cost measured is Temporal's."""
    return step


@workflow.defn(name="BareWorkflow")
class BareWorkflow:
    """Runs ``activities`` no-op activities in sequence, then ``timers`` short timers; returns when it
    finished (epoch seconds)."""

    @workflow.run
    async def run(self, inp: BareInput) -> float:
        for step in range(inp.activities):
            await workflow.execute_activity(noop, step, start_to_close_timeout=timedelta(seconds=30))
        for _ in range(inp.timers):
            await workflow.sleep(TIMER_S)
        return workflow.now().timestamp()


def build_bare_worker(client: Client, task_queue: str = TASK_QUEUE) -> Worker:
    """The bare worker, with the options ``workers.worker.main.build_worker`` gives podmedic's."""
    return Worker(client, task_queue=task_queue, workflows=[BareWorkflow], activities=[noop], **worker_options())


async def run_bare(client: Client, count: int, shape: Shape, concurrency: int = 100,
                   task_queue: str = TASK_QUEUE) -> dict[str, Any]:
    """Start ``count`` bare workflows of ``shape`` at once (``concurrency`` starts in flight); wait for all.

    Returns ``workflows_per_s`` (count / (last close - first start)) and the p50/p99 of each
    workflow's start-to-close time in ms.
    """
    gate = asyncio.Semaphore(concurrency)
    run = uuid.uuid4().hex[:6]
    starts: list[float] = []

    async def one(i: int) -> float:
        async with gate:
            starts.append(time.time())
            handle = await client.start_workflow(BareWorkflow.run,
                                                 BareInput(activities=shape.activities, timers=shape.timers),
                                                 id=f"bare-{run}-{i}", task_queue=task_queue)
            began = starts[-1]
        done: float = await handle.result()
        return done - began

    first = time.time()
    took = await asyncio.gather(*(one(i) for i in range(count)))
    last_close = max(first + t for t in took) if took else first
    return {"workflows": count, "activities": shape.activities, "timers": shape.timers,
            "elapsed_s": round(last_close - first, 3),
            "workflows_per_s": rate(count, last_close - first),
            "p50_ms": round(percentile([t * 1000 for t in took], 50), 1),
            "p99_ms": round(percentile([t * 1000 for t in took], 99), 1)}


async def _serve(address: str, task_queue: str) -> None:
    client = await connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with sweep_cycles(), build_bare_worker(client, task_queue):  # the collector as podmedic's worker runs it
        await stop.wait()


def main() -> None:
    """Entry point of the bare worker's process."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bare")
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", default=TASK_QUEUE)
    args = parser.parse_args()
    # INFO: the collector's line at the stop, which ``python -m benchmarks cost`` reads.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(args.address, args.task_queue))


if __name__ == "__main__":
    main()
