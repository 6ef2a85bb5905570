"""The worker's full collections: only after evictions, and stretched after a long one
(``workers/worker/collector.py``)."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path

import pytest

from benchmarks.cost import sweeps
from workers.worker.collector import Sweeps, sweep_cycles
from workers.worker.evictions import Evictions


class EveryTurn(Evictions):
    """A worker evicting workflows all the time (a storm's): every look finds a new eviction."""

    def total(self) -> int:
        self.count += 1
        return self.count


async def _sweeping_for(seconds: float, *, every_s: float, share: float,
                        evictions: Evictions | None = None) -> Sweeps:
    # A storm's pace: every turn brings a whole batch.
    sweeps = Sweeps(EveryTurn() if evictions is None else evictions, batch=1)
    task = asyncio.create_task(sweeps.run(every_s=every_s, share=share))
    await asyncio.sleep(seconds)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return sweeps


@pytest.mark.asyncio
async def test_a_long_collection_pushes_the_next_one_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow_collect(generation: int = 2) -> int:
        time.sleep(0.03)  # a heap whose full walk takes 30 ms
        return 0

    monkeypatch.setattr(gc, "collect", slow_collect)
    sweeps = await _sweeping_for(0.2, every_s=0.01, share=0.1)
    # The first waits the floor; every later one at least 30 ms / 10 %: 0.3 s, so one collection in 0.2 s.
    assert sweeps.count == 1 and sweeps.slowest_s >= 0.03
    assert sweeps.waits_s[0] == 0.01 and sweeps.waits_s[1] >= 0.3, sweeps.waits_s


@pytest.mark.asyncio
async def test_a_quick_collection_keeps_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)  # a small heap: next to no time
    sweeps = await _sweeping_for(0.15, every_s=0.02, share=0.5)
    assert sweeps.count >= 3 and all(w == 0.02 for w in sweeps.waits_s), sweeps.waits_s


@pytest.mark.asyncio
async def test_no_eviction_no_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    sweeps = await _sweeping_for(0.15, every_s=0.02, share=0.5, evictions=Evictions())
    assert collected == [] and sweeps.count == 0 and sweeps.skipped >= 3, sweeps.skipped


async def _after(evictions: Evictions, sweeps: Sweeps, moments: list[tuple[float, int]]) -> list[int]:
    """Sweep counts after each pause of ``moments``, having added its evictions before it."""
    task = asyncio.create_task(sweeps.run(every_s=0.02, share=0.5))
    await asyncio.sleep(0)  # it has read the count it starts from
    counts = []
    try:
        for pause, evicted in moments:
            evictions.count += evicted
            await asyncio.sleep(pause)
            counts.append(sweeps.count)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return counts


@pytest.mark.asyncio
async def test_a_few_evictions_wait_for_their_age_then_get_one_more_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    evictions = Evictions()
    sweeps = Sweeps(evictions, batch=100, within_s=0.3)
    # Three runs evicted at once: nothing at the next turns; one sweep once the first waited 0.3 s (about
    # 0.32 s in); one more 0.3 s after it (a run still held while the first walked); then none.
    counts = await _after(evictions, sweeps, [(0.15, 3), (0.35, 0), (0.6, 0), (0.5, 0)])
    assert counts == [0, 1, 2, 2], (counts, sweeps.held, sweeps.skipped)
    assert sweeps.held >= 5


@pytest.mark.asyncio
async def test_a_batch_of_evictions_is_swept_at_the_next_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    evictions = Evictions()
    sweeps = Sweeps(evictions, batch=100, within_s=10.0)
    counts = await _after(evictions, sweeps, [(0.1, 99), (0.1, 1)])
    assert counts == [0, 1], (counts, sweeps.held)


@pytest.mark.asyncio
async def test_the_stop_line_is_what_the_cost_benchmark_reads(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture,
                                                              tmp_path: Path) -> None:
    def timed_collect(generation: int = 2) -> int:
        time.sleep(0.01)
        return 0

    monkeypatch.setattr(gc, "collect", timed_collect)
    monkeypatch.setattr(gc, "freeze", lambda: None)  # the test process's collector stays as it was
    monkeypatch.setattr(gc, "set_threshold", lambda *thresholds: None)
    caplog.set_level(logging.INFO, logger="podmedic.worker.collector")
    async with sweep_cycles(every_s=0.02, share=0.5, evictions=EveryTurn(), batch=1) as swept:
        await asyncio.sleep(0.1)
    log = tmp_path / "worker.log"
    log.write_text(caplog.text)
    read = sweeps(log, workflows=2)
    assert swept.count >= 2 and read["count"] == swept.count, (read, swept.count)
    # Each took at least 10 ms; per workflow of two: at least 5 ms each.
    assert read["ms_per_workflow"] >= 5 * swept.count, read
