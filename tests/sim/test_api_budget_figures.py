"""The storm benchmark's API budget figures (``benchmarks/api_budget.py``) tell a worker that kept its
client-side limit from one that did not, against the simulator's APF (``podmedic_sim/flow_control.py``,
upstream's shape: 429 with ``Retry-After`` past a user's budget)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.api_budget import ApiBudget, sent_per_second
from benchmarks.fleet import Sim
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.load_report import KubeLoadReport
from podmedic.kube.throttle import TokenBucket
from podmedic_sim import SimCluster
from tests.helpers import run_on_loop


@pytest.fixture(scope="module")
def sim(unaudited_sim: SimCluster) -> SimCluster:
    """Its gateways speak as the worker (the budget's user): kept out of the RBAC proof."""
    return unaudited_sim


def _lists(sim: SimCluster, n: int, qps: float, burst: int) -> None:
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)), qps=qps, burst=burst).for_component("worker")
    try:
        for _ in range(n):
            run_on_loop(gateway, gateway.aio.list_pods("default", ""))
    finally:
        gateway.close()


@pytest.mark.asyncio
async def test_a_worker_within_its_limit_is_never_refused_and_one_without_is(sim: SimCluster) -> None:
    budget = ApiBudget(kube_qps=10, kube_burst=5)  # the server's: 12 a second, 6 at once
    async with Sim(sim.url) as api:
        try:
            await budget.apply(api)
            await asyncio.to_thread(_lists, sim, 30, 10, 5)  # the worker as --kube-qps runs it
            kept = await budget.figures(api)
            await budget.apply(api)  # the counts start again
            await asyncio.to_thread(_lists, sim, 30, 0, 1)  # no client-side limit
            unlimited = await budget.figures(api)
        finally:
            await api.post("flow-control", {"qps": None})
    assert kept is not None and kept["within_limit"], kept
    assert kept["worker_admitted"] == 30 and kept["worker_refused_429"] == 0
    assert kept["worker_max_per_second"] <= 10 + 5 and kept["apf_qps"] == pytest.approx(12)
    assert unlimited is not None and not unlimited["within_limit"] and unlimited["worker_refused_429"] > 0, unlimited
    assert await ApiBudget().figures(api) is None  # no limit: nothing to report


@pytest.mark.asyncio
async def test_the_workers_own_count_comes_from_its_log_line(sim: SimCluster, tmp_path: Path) -> None:
    # The line is the worker's own (podmedic/kube/load_report.py), so the bench reads what the worker writes.
    bucket = TokenBucket(qps=0, burst=1)
    for _ in range(9):
        bucket.take()
    log = tmp_path / "worker.log"
    log.write_text(f"2026-11-28 01:00:00,000 podmedic.kube.load INFO {KubeLoadReport(bucket).line(60)}\n")
    assert sent_per_second(log) == bucket.max_per_second == 9
    assert sent_per_second(tmp_path / "none.log") is None
    budget = ApiBudget(kube_qps=5, kube_burst=3)
    async with Sim(sim.url) as api:
        try:
            await budget.apply(api)
            over = await budget.figures(api, log)  # 9 in one second by its own count: over 5 + 3
        finally:
            await api.post("flow-control", {"qps": None})
    assert over is not None and over["worker_max_sent_per_second"] == 9 and not over["within_limit"], over
