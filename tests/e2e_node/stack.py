"""The e2e node tests' stack: the real ingest (pod status source) and worker on one simulator, and
training jobs made Ready on it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from temporalio.client import Client

from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.enforced import as_component
from tests.helpers import wait_until
from workers.ingest.service import run_ingest
from workers.ingest.settings import IngestSettings
from workers.worker.main import build_worker


@contextlib.asynccontextmanager
async def ingest_and_worker(client: Client, sim: SimCluster, task_queue: str,
                            policy: PolicySet) -> AsyncIterator[KubeGateway]:
    """The ingest and a worker on ``sim`` under ``policy``, for the block; the worker's cluster gateway."""
    # Each speaks as its ServiceAccount under deploy/'s RBAC: a call its role does not grant is a 403.
    kube, ingest_kube = KubeGateway(as_component(sim, "worker")), KubeGateway(as_component(sim, "ingest"))
    stop = asyncio.Event()
    ingest = asyncio.create_task(run_ingest(client, ingest_kube, policy, IngestSettings(), task_queue, stop,
                                            http=False))
    async with build_worker(client, task_queue, kube):
        yield kube
        stop.set()
        await ingest
    kube.close()
    ingest_kube.close()


def ready_jobs(sim: SimCluster, count: int) -> list[dict[str, Any]]:
    """``count`` new single-pod training jobs, once their pods are Ready (the simulator packs them)."""
    names = [f"train-{uuid.uuid4().hex[:6]}" for _ in range(count)]
    for name in names:
        sim.call(lambda n=name: sim.engine.create_training_job(n, image="registry.local/shared:1"))

    def ready() -> list[dict[str, Any]] | None:
        pods = [p for p in sim.state()["pods"] if p.get("job") in names and p.get("ready")]
        return pods if len(pods) == count else None

    return wait_until(ready, timeout=30, what=f"{count} Ready pods")
