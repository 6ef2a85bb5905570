"""End to end: devices failing in a storm → their pool is fenced by one rule first, which keeps new pods
off the pool's healthy devices, and goes once each failed device has its own rule or its incident closed.

The Temporal dev server, the simulator over HTTP, the real worker and ingest (pod status source). The
rule's shape is the DeviceTaintRule of resource.k8s.io/v1 (kubernetes/kubernetes
staging/src/k8s.io/api/resource/v1/types.go, DeviceTaintSelector: driver, pool and device, each
optional; KEP-5055): a selector that names a pool and no device selects every device of the pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.policy_file import parse_policy
from podmedic.domain.pool_fence import PoolFenceState, PoolRef
from podmedic.incidents.query import Row, list_incidents, list_query
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.e2e_node.stack import ingest_and_worker, ready_jobs
from tests.helpers import assert_eventually, served_sim, wait_until
from workflows.fleet.pool_fence import PoolFenceWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Three devices make a storm here (50 by default); node correlation is out of the way (9 > 4 per node).
POLICY = parse_policy("""
drivers:
  default:
    detection:
      node_correlation: {devices: 9}
      storm_fence: {devices: 3, window_s: 60, min_hold_s: 15, max_hold_s: 120, poll_s: 0.5}
    checkpoint: {timeout_s: 3, poll_s: 0.2}
    recovery:
      transient: [{action: same_node, timeout_s: 5}]
      verify_poll_s: 0.2
    close: {heal_wait_s: 60, anti_flap_s: 1, poll_s: 0.5}
    ticket: {backend: none}
""")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("e2e-storm"), nodes=3, image_pull_s=0.2) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str
                ) -> AsyncIterator[tuple[Client, KubeGateway]]:
    async with ingest_and_worker(dev_env.client, sim, task_queue, POLICY) as kube:
        yield dev_env.client, kube


async def test_a_storm_fences_the_pool_first_and_lets_go_once_its_devices_are_fenced_alone(
        sim: SimCluster, stack: tuple[Client, KubeGateway]) -> None:
    client, kube = stack
    pods = await asyncio.to_thread(ready_jobs, sim, 3)
    nodes = {p["node"] for p in pods}
    assert len(nodes) == 1, nodes  # the scheduler packs them on the lowest node: one pool, one healthy device left
    node = nodes.pop()
    devices = [p["devices"][0].split("/") for p in pods]
    pool = PoolRef(driver=devices[0][0], pool=devices[0][1])
    for driver, pool_name, device in devices:
        sim.set_device_health(driver, pool_name, device, "Unhealthy", reason="XidError",
                              message="XID 94: contained ECC error")

    rule = await asyncio.to_thread(wait_until, lambda: kube.get_taint_rule(pool.rule_name), timeout=30,
                                   what=f"the pool rule {pool.rule_name}")
    assert rule["spec"]["deviceSelector"] == {"driver": pool.driver, "pool": pool.pool}
    assert rule["spec"]["taint"]["effect"] == "NoSchedule" and rule["spec"]["taint"]["key"] == "podmedic.io/unhealthy"
    assert "storm: 3 devices" in rule["metadata"]["annotations"]["podmedic.io/reason"]
    assert rule["metadata"]["annotations"]["podmedic.io/changed-by"] == "podmedic worker (storm pool fence)"

    # Operators find it as they find incidents: `podmedic incidents list --type pool` (visibility lags a little).
    async def listed() -> list[Row]:
        rows = await list_incidents(client, list_query("pool", node=node), 10)
        assert [(r.id, r.attributes.get("PodmedicPhase")) for r in rows] == [(pool.workflow_id, "Fenced")], rows
        return rows

    await assert_eventually(listed, timeout=15)

    # The pool's fourth device is healthy, but the pool is fenced: a new job lands on another node.
    late = await asyncio.to_thread(ready_jobs, sim, 1)
    assert late[0]["node"] != node, late[0]

    fence = client.get_workflow_handle_for(PoolFenceWorkflow.run, pool.workflow_id)
    state: PoolFenceState = await asyncio.wait_for(fence.result(), timeout=120)
    assert state.devices == sorted("/".join(d) for d in devices)
    assert state.released and state.uncovered == [], state.timeline
    assert kube.get_taint_rule(pool.rule_name) is None
    # Let go only once each failed device had a rule of its own (or its incident had closed).
    assert [e.step for e in state.timeline if e.step != "told"] == ["fence", "hold", "release"], state.timeline
    told = " ".join(e.message for e in state.timeline if e.step == "told")
    assert all("/".join(d) in told for d in devices), told  # each device's report is on the timeline
