"""A pool's node, learned once from ResourceSlices (simulator over real HTTP, the real client).

The shape is upstream's: k8s.io/api resource/v1 ``ResourceSliceSpec`` names the pool in
``pool.name`` and, for node-local devices, the node in ``nodeName``; a network-attached pool's
slices set ``nodeSelector`` or ``allNodes`` instead (exactly one of the four is required). The
requests are counted on the API server's side, by the simulator's ledger.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from podmedic.kube.errors import BadRequest
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.pool_nodes import PoolNodes
from podmedic_sim import SimCluster
from tests.helpers import run_on_loop, served_sim

DRIVER = "gpu.nvidia.com"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("pools"), nodes=3) as cluster:
        yield cluster


@pytest.fixture
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)))  # a pool map of its own
    yield gateway
    gateway.close()


def _test_client(sim: SimCluster) -> k8s.ResourceV1Api:
    return k8s.ResourceV1Api(k8s_config.new_client_from_config(config_file=str(sim.kubeconfig_path)))


def _published(sim: SimCluster) -> dict[tuple[str, str], str]:
    """What the slices say, read by the test's own client (not podmedic's, so not in the ledger)."""
    slices = _test_client(sim).list_resource_slice(_preload_content=False)
    items: list[dict[str, Any]] = json.loads(slices.data)["items"]
    return {(s["spec"]["driver"], s["spec"]["pool"]["name"]): s["spec"]["nodeName"]
            for s in items if s["spec"].get("nodeName")}


def _slice_requests(sim: SimCluster) -> int:
    return sum(n for e, n in sim.ledger.counts.items() if e.resource == "resourceslices")


def test_learned_pools_are_found_without_a_request(sim: SimCluster, kube: KubeGateway) -> None:
    published = _published(sim)
    assert len(published) == 3  # one pool per node
    assert kube.learn_pools() == len(published)
    sim.ledger.counts.clear()
    assert {key: run_on_loop(kube, kube.aio.pool_node(*key)) for key in published} == published
    assert _slice_requests(sim) == 0


def test_a_pool_not_learned_is_read_at_its_first_use_only(sim: SimCluster, kube: KubeGateway) -> None:
    (driver, pool), node = next(iter(_published(sim).items()))
    sim.ledger.counts.clear()
    assert run_on_loop(kube, kube.aio.pool_node(driver, pool)) == node
    assert run_on_loop(kube, kube.aio.pool_node(driver, pool)) == node
    assert _slice_requests(sim) == 1


def test_a_pool_of_a_node_added_later_is_found_by_what_the_server_selects(sim: SimCluster, kube: KubeGateway) -> None:
    """A real API server refuses ``spec.pool.name`` on ResourceSlices with 400 (kubernetes/api
    resource/v1 ``ResourceSliceSelector*``: name, nodeName and driver only); the gateway selects by the
    driver and keeps the pool's slices."""
    (driver, pool), node = sorted(_published(sim).items())[-1]
    with pytest.raises(BadRequest, match=r"list resourceslices spec\.pool\.name"):
        # Not retried: the same request can never succeed.
        run_on_loop(kube, kube.aio.list_slices(f"spec.pool.name={pool}"))
    assert run_on_loop(kube, kube.aio.pool_node(driver, pool)) == node
    assert [s["spec"]["pool"]["name"] for s in run_on_loop(kube, kube.aio.pool_slices(driver, pool))] == [pool]


def test_a_network_attached_pool_has_no_node(sim: SimCluster, kube: KubeGateway) -> None:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric-0"},
            "spec": {"driver": DRIVER, "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                     "allNodes": True, "devices": [{"name": "switch-0"}]}}
    _test_client(sim).create_resource_slice(body)
    try:
        assert kube.learn_pools() == 3  # the node-local slices only
        assert run_on_loop(kube, kube.aio.pool_node(DRIVER, "fabric")) is None
    finally:
        _test_client(sim).delete_resource_slice("fabric-0")


def test_the_map_forgets_all_at_once_past_its_limit() -> None:
    pools = PoolNodes(limit=2)
    node_local = [{"spec": {"driver": DRIVER, "pool": {"name": f"node-{i}"}, "nodeName": f"node-{i}"}}
                  for i in range(3)]
    assert pools.learn(node_local[:2]) == 2 and len(pools) == 2
    assert pools.learn(node_local[2:]) == 1
    assert len(pools) == 1 and pools.get(DRIVER, "node-2") == "node-2" and pools.get(DRIVER, "node-0") is None
