"""How a worker's interpreter collects its cyclic garbage: seldom by allocation count, and on a clock.

Two forces pull apart. A worker allocates hundreds of short-lived objects per workflow task and
activity (payloads, protobuf messages, API answers), nearly all freed by reference counting, and
CPython's default collector thresholds start a collection every 700 allocations, a visible share
of a worker's CPU (perf), so ``tune_gc`` raises them. But every workflow the SDK evicts from its
cache (the cache is full, or its run completed) is left as a reference cycle: the SDK tears its
coroutines down by raising into them, and the tracebacks hold frames that hold the workflow. Only
a full collection frees those, and with the raised thresholds one came so seldom that a worker
through a hall-wide storm (far more open workflows than cached ones) grew without bound.
``sweep_cycles`` runs a full collection on a clock, which bounds that garbage to some seconds of
evictions. A full collection walks every object alive but what ``gc.freeze`` hid at the worker's
start, and on a storm's heap one every 5 s took a large share of the worker's Python time. So the
clock stretches: after a collection that took ``t``, the next comes ``max(5 s, t / 5 %)`` later, at
most 5 % of the worker's time however large its heap. And a sweep is made only when workflows were
evicted since the one before (``workers/worker/evictions.py``), and once more after that, for the
evictions still under way while it ran: on a clock alone, a worker holding its open incidents, or
idle, walked its whole heap every 5 s to free nothing.

A walk's cost is the heap's size, whatever it frees, so a few evicted runs do not get one of their
own: a collection comes once ``SWEEP_BATCH`` runs were evicted since the last (in a storm, at
every turn), or once the first of fewer has waited ``SWEEP_WITHIN_S``. The garbage stays bounded
(``SWEEP_BATCH`` runs, or ``SWEEP_WITHIN_S`` of evictions) and a quiet worker walks its heap a few
times a minute at most. The measurements behind each rule are in docs/BENCHMARKS.md ("What the
design rests on") and docs/SCALING.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator

from workers.worker.evictions import EVICTIONS, Evictions

log = logging.getLogger("podmedic.worker.collector")

GC_THRESHOLDS = (20_000, 20, 20)
"""The cyclic collector's thresholds in a worker (CPython's: 700, 10, 10)."""

SWEEP_EVERY_S = 5.0
"""Seconds between the full collections of ``sweep_cycles``, at the least."""

SWEEP_BATCH = 250
"""Evicted workflows that get a full collection at the next turn: a few tens of MiB of garbage at most."""

SWEEP_WITHIN_S = 30.0
"""The longest an evicted workflow waits for its full collection when fewer than ``SWEEP_BATCH`` are."""

SWEEP_SHARE = 0.05
"""The share of the worker's time full collections may take (``sweep_cycles`` waits longer after a long one)."""


def tune_gc() -> None:
    """Collect cycles by allocation count less often, and never scan what the process holds from its start.

    Call once, after imports and setup (``gc.freeze`` moves everything alive then out of the
    collector's sight). The bare baseline's worker calls it too.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class Sweeps:
    """The full collections made so far, for the log and for tests."""

    def __init__(self, evictions: Evictions = EVICTIONS, *, batch: int = SWEEP_BATCH,
                 within_s: float = SWEEP_WITHIN_S) -> None:
        self.evictions = evictions
        self.batch = batch
        self.within_s = within_s
        self.count = 0
        self.skipped = 0  # turns with no eviction since the sweep before: no collection
        self.held = 0  # turns with fewer than ``batch`` evictions, none older than ``within_s``: not yet
        self.freed = 0
        self.slowest_s = 0.0
        self.total_s = 0.0
        self.waits_s: list[float] = []  # the pause before each collection, the last few

    async def run(self, every_s: float, share: float = SWEEP_SHARE) -> None:
        """Collect, at turns ``every_s`` apart at least and at most ``share`` of the time, once ``batch``
        workflows were evicted since the last collection or the first of fewer has waited ``within_s``;
        and once more ``within_s`` after a collection that had evictions to free (a run evicted while it
        walked may still have been held). Until cancelled."""
        loop = asyncio.get_running_loop()
        wait, swept, since, trailing = every_s, self.evictions.total(), None, False
        while True:
            self.waits_s = [*self.waits_s[-9:], wait]
            await asyncio.sleep(wait)
            now, at = self.evictions.total(), loop.time()
            pending = now - swept
            if pending == 0 and not trailing:
                self.skipped += 1
                wait = every_s
                continue
            since = at if since is None else since
            if pending < self.batch and at - since < self.within_s:
                self.held += 1
                wait = every_s
                continue
            trailing = pending > 0
            swept, since = now, (at if trailing else None)
            wait = max(every_s, self.once() / share)

    def once(self) -> float:
        """One full collection; the seconds it took."""
        started = time.perf_counter()
        freed = gc.collect()
        took = time.perf_counter() - started
        self.count, self.freed, self.slowest_s = self.count + 1, self.freed + freed, max(self.slowest_s, took)
        self.total_s += took
        log.debug("full collection: %d unreachable objects freed in %.1f ms", freed, took * 1000)
        return took


@contextlib.asynccontextmanager
async def sweep_cycles(every_s: float = SWEEP_EVERY_S, share: float = SWEEP_SHARE,
                       evictions: Evictions = EVICTIONS, *, batch: int = SWEEP_BATCH,
                       within_s: float = SWEEP_WITHIN_S) -> AsyncIterator[Sweeps]:
    """Within it, the collector runs tuned (``tune_gc``), and full collections as ``Sweeps.run`` makes
    them (``every_s`` apart at least, at most ``share`` of the time, after ``batch`` evictions or
    ``within_s`` after fewer), on this event loop (a collection holds the GIL wherever it runs)."""
    tune_gc()
    sweeps = Sweeps(evictions, batch=batch, within_s=within_s)
    task = asyncio.create_task(sweeps.run(every_s, share), name="podmedic-sweep-cycles")
    try:
        yield sweeps
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        log.info("collector: %d full collections freed %d objects in %.1f ms (slowest %.1f ms); %d turns "
                 "skipped, no workflow evicted; %d waited for more evictions", sweeps.count, sweeps.freed,
                 sweeps.total_s * 1000, sweeps.slowest_s * 1000, sweeps.skipped, sweeps.held)
