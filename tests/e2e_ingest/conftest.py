"""Fixtures shared by the ingest end-to-end tests (HTTP front, cluster watch sources).

Append only: several test files rely on these names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.kube import KubeGateway
from podmedic.sim import SimCluster, SimConfig
from podmedic.sim.config import SimTimings
from workers.worker import build_worker


@pytest.fixture(scope="module")
def ingest_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A small simulated cluster (2 nodes x 4 devices) with fast timings."""
    timings = SimTimings(image_pull_s=0.5, container_start_s=0.1, kubelet_report_s=0.1, backoff_base_s=0.3,
                         backoff_max_s=2.0, workload_step_s=0.1, checkpoint_save_s=0.1)
    cluster = SimCluster(SimConfig(nodes=2, devices_per_node=4, timings=timings))
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("e2e-ingest") / "kubeconfig")
    yield cluster
    cluster.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def ingest_worker(dev_env: WorkflowEnvironment, ingest_sim: SimCluster,
                        task_queue: str) -> AsyncIterator[tuple[Client, str]]:
    """The real worker against ``ingest_sim`` on a fresh task queue; yields (client, task queue)."""
    assert ingest_sim.kubeconfig_path is not None
    kube = KubeGateway(Path(ingest_sim.kubeconfig_path))
    async with build_worker(dev_env.client, task_queue, kube):
        yield dev_env.client, task_queue
    kube.close()
