"""The e2e guard tests' stack: a 2x4-GPU simulator with the audit recorder on, the worker and the ingest."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import IncidentState
from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from podmedic_sim.audit import ENV, WRITE_VERBS, Access
from tests.helpers import served_sim
from workers.cli.connection import Target
from workers.ingest.service import run_ingest
from workers.ingest.settings import IngestSettings
from workers.worker.main import build_worker
from workflows.device.incident import DeviceIncidentWorkflow

DRIVER = "gpu.nvidia.com"
DISRUPTIVE = {"devicetaintrules", "pods", "nodes"}
DRIVERS = """
drivers:
  default:
    checkpoint: {timeout_s: 5, poll_s: 0.2}
    close: {heal_wait_s: 1, anti_flap_s: 1, poll_s: 0.5}
    ticket: {backend: none}
    detection: {slice_taints: {"gpu.nvidia.com/xid": by_code}}
    classification: {codes: {permanent: [79]}}
"""


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """2 nodes x 4 GPUs, with the audit recorder on (the deploy tests may have chosen its directory)."""
    chosen = os.environ.get(ENV)
    if not chosen:
        os.environ[ENV] = str(tmp_path_factory.mktemp("audit"))
    try:
        with served_sim(tmp_path_factory.mktemp("e2e-guard"), nodes=2, devices_per_node=4) as cluster:
            yield cluster
    finally:
        if not chosen:
            os.environ.pop(ENV, None)


async def stack(env: WorkflowEnvironment, sim: SimCluster, policy: PolicySet, task_queue: str) -> AsyncIterator[Client]:
    """The worker and the ingest service on ``task_queue`` (one per module: the guard is per namespace)."""
    assert sim.kubeconfig_path is not None
    kube = KubeGateway(Path(sim.kubeconfig_path))
    stop = asyncio.Event()
    ingest = asyncio.create_task(run_ingest(env.client, kube, policy, IngestSettings(), task_queue, stop, http=False))
    async with build_worker(env.client, task_queue, kube):
        yield env.client
        stop.set()
        await ingest
    kube.close()


def fail(sim: SimCluster, devices: list[tuple[str, str]], code: str) -> None:
    """The driver taints the devices in their ResourceSlice with an XID (the ingest watches slices)."""
    for pool, device in devices:
        sim.set_slice_taint(DRIVER, pool, device, "gpu.nvidia.com/xid", value=code)


def target(client: Client) -> Target:
    """Where ``podmedic guard`` finds this Temporal."""
    return Target(address=client.service_client.config.target_host, namespace=client.namespace, ui_url="")


def disruptive(accesses: list[tuple[float, Access]]) -> list[Access]:
    """The worker's writes to taint rules, pods (eviction, exec, patch) and nodes."""
    return [a for _, a in accesses if a.component == "worker" and a.verb in WRITE_VERBS and a.resource in DISRUPTIVE]


def writes(accesses: list[tuple[float, Access]]) -> list[tuple[str, str, str]]:
    """Every write the worker made, as RBAC rules."""
    return sorted({a.rule for _, a in accesses if a.component == "worker" and a.verb in WRITE_VERBS})


async def state(client: Client, pool: str, device: str) -> IncidentState:
    """The device incident's state query."""
    handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{DRIVER}/{pool}/{device}")
    return await handle.query(DeviceIncidentWorkflow.get_state)


async def incidents_seen(client: Client, devices: list[tuple[str, str]]) -> str:
    """Where each device's incident stands (phase and latest timeline lines), for a failed wait's message."""
    seen = []
    for pool, device in devices:
        try:
            now = await state(client, pool, device)
        except Exception as err:  # not started, or not answering: that is what to report
            seen.append(f"{pool}/{device}: no state ({type(err).__name__}: {err})")
            continue
        lines = "; ".join(f"{e.step}: {e.message}" for e in now.timeline[-4:])
        seen.append(f"{pool}/{device}: {now.phase.value} [{lines}]")
    return "\n".join(seen)
