"""Fixtures shared by the ingest end-to-end tests (HTTP front, cluster watch sources).

Append only: several test files rely on these names.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.policy_file import PolicySet, load_policy
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.enforced import as_component
from tests.helpers import assert_eventually, served_sim
from workers.ingest.delivery import Deliverer
from workers.ingest.service import run_sources
from workers.ingest.sources import ClusterSource, cluster_sources
from workers.worker.main import build_worker


@pytest.fixture(scope="module")
def ingest_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A small simulated cluster (2 nodes x 4 devices) with fast timings."""
    with served_sim(tmp_path_factory.mktemp("e2e-ingest")) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def ingest_worker(dev_env: WorkflowEnvironment, ingest_sim: SimCluster,
                        task_queue: str) -> AsyncIterator[tuple[Client, str]]:
    """The real worker against ``ingest_sim`` on a fresh task queue; yields (client, task queue)."""
    kube = KubeGateway(as_component(ingest_sim, "worker"))  # under deploy/'s RBAC: an ungranted call is a 403
    async with build_worker(dev_env.client, task_queue, kube):
        yield dev_env.client, task_queue
    kube.close()


# -- cluster watch sources (H2) --------------------------------------------------------------


class SourceSet:
    """One ingest replica's cluster sources feeding its own Deliverer, run by
    ``workers.ingest.service.run_sources`` exactly as ``podmedic ingest`` runs them."""

    def __init__(self, client: Client, kube: KubeGateway, policies: PolicySet, task_queue: str,
                 state_dir: Path | None) -> None:
        self.deliverer = Deliverer(client, policies, task_queue)
        # Short watches so a stop takes effect within 2 s (production uses 30 s).
        self.sources = cluster_sources(kube, policies, state_dir, watch_timeout_s=2, cursor_interval_s=0.2)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def source(self, name: str) -> ClusterSource:
        """The source called ``name`` (``pod-status``, ``slice-taints``, ``prepare-failures``)."""
        return next(s for s in self.sources if s.name == name)

    def start(self) -> SourceSet:
        self._task = asyncio.create_task(run_sources(self.sources, self.deliverer, self._stop))
        return self

    async def watching(self, timeout: float = 15.0) -> None:
        """Wait until every source has listed (or resumed) and watches."""
        async def check() -> None:
            assert all(s.stats.watches > 0 for s in self.sources), [(s.name, s.stats) for s in self.sources]
        await assert_eventually(check, timeout=timeout)

    async def stop(self) -> None:
        """Stop the sources and wait for their threads (each flushes its cursor)."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None


@pytest_asyncio.fixture(loop_scope="session")
async def source_sets(ingest_worker: tuple[Client, str], ingest_sim: SimCluster
                      ) -> AsyncIterator[Callable[..., SourceSet]]:
    """Start ingest replicas' cluster sources on the worker's task queue; all stopped at the end,
    and the incidents they opened terminated (they are this test's alone)."""
    client, task_queue = ingest_worker
    kube = KubeGateway(as_component(ingest_sim, "ingest"))  # under deploy/'s RBAC: an ungranted call is a 403
    started: list[SourceSet] = []

    def start(policies: PolicySet | None = None, state_dir: Path | None = None) -> SourceSet:
        sources = SourceSet(client, kube, policies or load_policy(None), task_queue, state_dir).start()
        started.append(sources)
        return sources

    yield start
    for sources in started:
        await sources.stop()
    async for wf in client.list_workflows(f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'"):
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(wf.id, run_id=wf.run_id).terminate("test over")
    kube.close()
