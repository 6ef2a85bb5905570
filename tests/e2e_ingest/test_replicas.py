"""End to end: two ingest replicas against one Temporal, the cluster watches on the Lease's holder.

Both replicas run ``workers.ingest.service.run_ingest`` as ``podmedic ingest`` does, each with its
own cursor directory (as two pods have), campaigning for one Lease in the simulator (client-go's
rules: workers/ingest/leader.py). Only the leader watches; when it stops (releasing the Lease) or
dies (leaving it to expire), the other lists from scratch and goes on: a device that failed before
the hand-over is seen again and adds nothing to its incident (same event id), one that fails after it
opens its incident, and no device ever gets a second incident.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from podmedic.domain.policy_file import load_policy
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.helpers import assert_eventually, wait_until
from workers.ingest.leader import LeaseConfig
from workers.ingest.service import run_ingest
from workers.ingest.settings import IngestSettings
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
LEASE = "podmedic-ingest-replicas"
TIMINGS = {"lease_duration_s": 4.0, "renew_deadline_s": 3.0, "retry_period_s": 0.3}


class Replica:
    """One ingest replica running in this process until stopped or killed."""

    def __init__(self, name: str, client: Client, kube: KubeGateway, task_queue: str, state_dir: Path) -> None:
        self.name = name
        self.stop = asyncio.Event()
        election = LeaseConfig("default", LEASE, name, **TIMINGS)
        settings = IngestSettings(state_dir=state_dir)
        self.task = asyncio.create_task(run_ingest(client, kube, load_policy(None), settings, task_queue, self.stop,
                                                   http=False, election=election))

    async def shut_down(self) -> None:
        """Stop as on SIGTERM: the Lease is released."""
        self.stop.set()
        await self.task

    async def kill(self) -> None:
        """Die as on SIGKILL: nothing released, the Lease left to expire."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@pytest_asyncio.fixture(loop_scope="session")
async def replicas(ingest_sim: SimCluster, ingest_worker: tuple[Client, str],
                   tmp_path: Path) -> AsyncIterator[tuple[Replica, Replica]]:
    client, task_queue = ingest_worker
    kube = KubeGateway(Path(str(ingest_sim.kubeconfig_path)))
    pair = (Replica("ingest-a", client, kube, task_queue, tmp_path / "a"),
            Replica("ingest-b", client, kube, task_queue, tmp_path / "b"))
    yield pair
    for replica in pair:
        if not replica.task.done():
            await replica.shut_down()
    kube.close()


def _holder(sim: SimCluster) -> str:
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    try:
        lease = kube.get_lease("default", LEASE)
    finally:
        kube.close()
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def _incident(client: Client, device: str, events: int) -> None:
    handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{device}")

    async def seen() -> None:
        try:
            state = await handle.query(DeviceIncidentWorkflow.get_state)
        except Exception as exc:  # not started yet
            raise AssertionError(f"{device}: no incident yet ({exc})") from exc
        assert state.events_seen == events, (device, state.events_seen)

    await assert_eventually(seen, timeout=30)


async def _runs(client: Client, device: str) -> int:
    return len([w async for w in client.list_workflows(f'WorkflowId = "device/{device}"')])


USED: set[tuple[str, str, str]] = set()
"""Devices an earlier test of this module failed: their incidents are theirs."""


def _free(sim: SimCluster, count: int) -> list[tuple[str, str, str]]:
    held = {tuple(d.split("/")) for p in sim.state()["pods"] for d in p.get("devices", [])}
    devices = [(d["driver"], d["pool"], d["device"]) for d in sim.state()["devices"]
               if d["health"] == "Healthy" and (d["driver"], d["pool"], d["device"]) not in held | USED]
    chosen = devices[-count:]
    USED.update(chosen)
    return chosen


async def _hand_over(sim: SimCluster, replicas: tuple[Replica, Replica], client: Client, *, kill: bool) -> float:
    """Fail a device under the first leader, end that leader, fail another; the takeover's seconds."""
    first_device, second_device = _free(sim, 2)
    leader_name = await asyncio.to_thread(wait_until, lambda: _holder(sim), timeout=15, what="a leader")
    leader, standby = replicas if replicas[0].name == leader_name else replicas[::-1]
    sim.set_slice_taint(*first_device, "gpu.nvidia.com/xid", "79", "None")
    await _incident(client, "/".join(first_device), events=1)
    started = time.monotonic()
    ending = asyncio.create_task(leader.kill() if kill else leader.shut_down())
    await asyncio.to_thread(wait_until, lambda: _holder(sim) == standby.name, timeout=15, what="the standby leading")
    took = time.monotonic() - started
    await ending
    sim.set_slice_taint(*second_device, "gpu.nvidia.com/xid", "79", "None")
    await _incident(client, "/".join(second_device), events=1)
    await _incident(client, "/".join(first_device), events=1)  # listed again by the new leader: nothing added
    for device in (first_device, second_device):
        assert await _runs(client, "/".join(device)) == 1, f"{device}: one incident, not two"
        sim.set_slice_taint(*device, "gpu.nvidia.com/xid", remove=True)
    return took


async def test_a_stopped_leader_hands_the_watches_over_at_once(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], replicas: tuple[Replica, Replica]
) -> None:
    took = await _hand_over(ingest_sim, replicas, ingest_worker[0], kill=False)
    assert took < TIMINGS["lease_duration_s"], f"released, so no wait for the lease to expire ({took:.1f}s)"


async def test_a_killed_leader_is_replaced_once_its_lease_expires(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], replicas: tuple[Replica, Replica]
) -> None:
    took = await _hand_over(ingest_sim, replicas, ingest_worker[0], kill=True)
    assert took < TIMINGS["lease_duration_s"] + 2 * TIMINGS["retry_period_s"] + 2, f"took {took:.1f}s"
