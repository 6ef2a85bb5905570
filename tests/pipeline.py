"""The whole pipeline for a test against the simulator: ingest with the node agent, a worker, a vendor desk."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from temporalio.client import Client

from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk, running_desk
from tests.enforced import as_component
from workers.stack.ingest_agent import run_ingest_and_agent
from workers.worker.main import build_worker


@contextlib.asynccontextmanager
async def running_pipeline(client: Client, sim: SimCluster, policies: PolicySet,
                           task_queue: str) -> AsyncIterator[KubeGateway]:
    """The ingest (cluster watches and HTTP), the simulator's node agent and the worker on ``task_queue``,
    until the block exits; yields the worker's Kubernetes gateway. The worker and the ingest speak as their
    ServiceAccounts under deploy/'s RBAC (tests/enforced.py): a call a role does not grant is a 403."""
    kube, ingest_kube = KubeGateway(as_component(sim, "worker")), KubeGateway(as_component(sim, "ingest"))
    stop = asyncio.Event()
    ingest = asyncio.create_task(run_ingest_and_agent(client, ingest_kube, policies, task_queue, stop, sim.url))
    try:
        async with build_worker(client, task_queue, kube):
            yield kube
    finally:
        stop.set()
        await ingest
        kube.close()
        ingest_kube.close()


@contextlib.asynccontextmanager
async def served_desk(sim: SimCluster, resolve_after_s: float) -> AsyncIterator[VendorDesk]:
    """A vendor ticket desk over real HTTP, its URL in ``PODMEDIC_TICKET_URL`` while the block runs; it
    resolves a ticket after ``resolve_after_s`` by replacing the device."""
    async with running_desk(sim.url, resolve_after_s) as (vendor, url):
        os.environ["PODMEDIC_TICKET_URL"] = url
        try:
            yield vendor
        finally:
            os.environ.pop("PODMEDIC_TICKET_URL", None)
