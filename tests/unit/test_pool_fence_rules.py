"""Which of a pool's devices have a DeviceTaintRule of their own, against the simulator's API server
(real HTTP, real client): one list of the pool's rules by their pool label, not a get per device.

In a 10,000-device storm under the manifests' 50 QPS, 1,251 pool fences' gets per device were
80 % of the worker's requests (101,690 of 127,769 in the first hour).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.pool_fence import PoolFenceActivities
from activities.taint import TaintActivities
from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_recovery import Effect
from podmedic.domain.pool_fence import PoolDevicesInput, PoolRef, PoolRuleInput
from podmedic.domain.steps import TaintInput
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster, SimConfig

DRIVER = "gpu.nvidia.com"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    cluster = SimCluster(SimConfig(nodes=2, devices_per_node=4), api_only=True)
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("pool-rules") / "kubeconfig")
    yield cluster
    cluster.stop()


@pytest.fixture
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)))
    yield gateway
    gateway.close()


def _device(pool: str, device: str) -> DeviceRef:
    return DeviceRef(driver=DRIVER, pool=pool, device=device)


def _rule_reads(sim: SimCluster) -> dict[str, int]:
    counts = {"get": 0, "list": 0}
    for entry in sim.ledger.entries():
        if entry["resource"] == "devicetaintrules" and entry["verb"] in counts:
            counts[str(entry["verb"])] += int(str(entry["count"]))
    return counts


async def test_the_pools_own_rules_are_found_with_one_list(sim: SimCluster, kube: KubeGateway) -> None:
    taint, fence = TaintActivities(kube), PoolFenceActivities(kube)
    pool = [_device("node-0000", f"gpu-{n}") for n in range(4)]
    for ref in (pool[0], pool[2], _device("node-0001", "gpu-1")):  # the last: same device name, another pool
        await taint.ensure(TaintInput(incident_id=ref.workflow_id, device=ref, effect=Effect.NO_SCHEDULE, reason="t"),
                           f"{ref.workflow_id}@run")
    await fence._fence(PoolRuleInput(pool=PoolRef(driver=DRIVER, pool="node-0000"), reason="storm"), "pool@run")
    before = _rule_reads(sim)
    without = await fence._without_own_rule(PoolDevicesInput(devices=pool))
    after = _rule_reads(sim)
    # The pool's own rule covers them all, but it is not theirs; node-0001's gpu-1 rule is not node-0000's.
    assert without == [pool[1].resource_id, pool[3].resource_id]
    assert (after["list"] - before["list"], after["get"] - before["get"]) == (1, 0)
