"""The gateway's calls on the event loop (``podmedic/kube/loop_calls.py``) against the simulator over HTTP.

They must be the client's calls in every way the API server can tell: the same answers and errors
for the same request, the same throttling manners (client-go's token bucket before every try; a 429
with ``Retry-After`` from API Priority and Fairness waited out, as rest/request.go does), and the same
User-Agent. The throttling's shape is upstream's (see tests/sim/test_flow_control.py).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from podmedic.kube import api_requests
from podmedic.kube.gateway import Conflict, KubeGateway, ServerError
from podmedic.kube.loop_http import CONNECTION_RETRIES
from podmedic_sim import SimCluster
from tests.sim.conftest import pod_manifest
from tests.sim.test_flow_control import _flow


@pytest.fixture(scope="module")
def sim(unaudited_sim: SimCluster) -> SimCluster:
    """Its gateways speak as components of their own (budgets are per user): kept out of the RBAC proof."""
    return unaudited_sim


def _pod(sim: SimCluster, api: client.ApiClient, ns: str, name: str) -> str:
    client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest(name))
    return str(client.CoreV1Api(api).read_namespaced_pod(name, ns).metadata.resource_version)


@contextlib.contextmanager
def _budgeted(sim: SimCluster, server: tuple[int, int], client_side: tuple[float, int],
              user: str) -> Iterator[tuple[KubeGateway, dict[str, Any]]]:
    """A gateway speaking as ``podmedic-<user>`` with the client-side QPS and burst ``client_side``, against a
    server that admits ``server`` (QPS, burst) per user; yields it and, filled in after, the server's count."""
    _flow(sim, {"qps": server[0], "burst": server[1]})
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)), qps=client_side[0], burst=client_side[1]
                          ).for_component(user)
    state: dict[str, Any] = {}
    try:
        yield gateway, state
    finally:
        gateway.close()
        state.update(_flow(sim)["users"][f"podmedic-{user}"])
        _flow(sim, {"qps": None})


async def test_a_write_on_the_loop_waits_out_retry_after(sim: SimCluster, api: client.ApiClient, ns: str) -> None:
    _pod(sim, api, ns, "loop-apf")
    with _budgeted(sim, (1, 1), (0, 1), "loopapf") as (gateway, state):
        started = time.monotonic()
        for n in range(4):
            await gateway.aio.patch_pod_annotations(ns, "loop-apf", {"test.podmedic.io/apf": str(n)})
        elapsed = time.monotonic() - started
    assert state["dropped"] > 0, state  # the server throttled ...
    assert state["admitted"] == 4 and elapsed >= 3.0  # ... and each write got through after Retry-After
    assert state["admitted"] + state["dropped"] == gateway.limiter.taken, state  # every try took a token
    assert sim.store.get("pods", ns, "loop-apf")["metadata"]["annotations"]["test.podmedic.io/apf"] == "3"


async def test_loop_calls_keep_under_the_client_side_limit(sim: SimCluster, api: client.ApiClient, ns: str) -> None:
    _pod(sim, api, ns, "loop-polite")
    with _budgeted(sim, (12, 6), (10, 5), "looppolite") as (gateway, state):
        started = time.monotonic()
        for _ in range(35):
            assert await gateway.aio.get_pod(ns, "loop-polite", fresh=True) is not None
        elapsed = time.monotonic() - started
    assert state["dropped"] == 0, state  # never throttled: it never asked for more than it was given
    assert state["max_per_second"] <= 10 + 5, state
    assert elapsed >= (35 - 5) / 10 - 0.2  # the bucket, not the server, paced it


async def test_the_loop_and_the_client_answer_a_request_alike(sim: SimCluster, api: client.ApiClient, ns: str) -> None:
    version = _pod(sim, api, ns, "loop-alike")
    gateway = KubeGateway(Path(str(sim.kubeconfig_path))).for_component("loopalike")
    try:
        stale = str(int(version) - 1)
        with pytest.raises(Conflict) as in_thread:
            gateway.patch_pod_annotations(ns, "loop-alike", {"a": "1"}, resource_version=stale)
        with pytest.raises(Conflict) as on_loop:
            await gateway.aio.patch_pod_annotations(ns, "loop-alike", {"a": "1"}, resource_version=stale)
        assert str(on_loop.value) == str(in_thread.value) and on_loop.value.status == 409
        assert await gateway.aio.get_pod(ns, "no-such-pod", fresh=True) is None
        assert gateway.get_pod(ns, "no-such-pod", fresh=True) is None
        patched = await gateway.aio.patch_pod_annotations(ns, "loop-alike", {"a": "2"}, resource_version=version)
        assert patched["metadata"]["annotations"]["a"] == "2"  # the pod as the server answered it
        assert patched == gateway.get_pod(ns, "loop-alike", fresh=True)
        seen = [e for e in sim.ledger.entries() if e["component"] == "loopalike" and e["resource"] == "pods"]
        assert {(e["verb"], e["status"]) for e in seen} == {("patch", 409), ("patch", 200), ("get", 404),
                                                           ("get", 200)}, seen
    finally:
        gateway.close()


async def test_a_server_that_cannot_be_reached_is_a_server_error(sim: SimCluster) -> None:
    gateway = KubeGateway(Path(str(sim.kubeconfig_path))).for_component("unreachable")
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    gateway.loop_http._host = f"http://127.0.0.1:{port}"
    try:
        with pytest.raises(ServerError, match="create event in default"):
            await gateway.aio.create_event("default", {"metadata": {"name": "x"}})
    finally:
        gateway.close()
    assert gateway.limiter.taken == CONNECTION_RETRIES + 1  # tried again, each try a token


def test_a_request_is_described_as_the_client_sends_it() -> None:
    # kubernetes-client/python 37: patch_namespaced_pod's first content type, a JSON patch, is sent as a
    # strategic merge patch for a dict body (rest.py); podmedic's writes name their field manager.
    req = api_requests.annotate_pod("ns", "p/q", {"a": None}, "7")
    assert (req.method, req.target(), req.content_type) == (
        "PATCH", "/api/v1/namespaces/ns/pods/p%2Fq?fieldManager=podmedic", "application/strategic-merge-patch+json")
    assert req.body == {"metadata": {"annotations": {"a": None}, "resourceVersion": "7"}}
    delete = api_requests.delete_taint_rule("v1", "r", "9")
    assert (delete.method, delete.target(), delete.body) == (
        "DELETE", "/apis/resource.k8s.io/v1/devicetaintrules/r", {"preconditions": {"resourceVersion": "9"}})


async def test_the_loop_reads_and_writes_what_the_generated_client_does(sim: SimCluster, api: client.ApiClient,
                                                                         ns: str) -> None:
    # The referee is kubernetes-client/python's generated CoreV1Api and ResourceV1Api (upstream, called here
    # directly): each described request must answer what the generated method of the same call answers.
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    gateway = KubeGateway(Path(str(sim.kubeconfig_path))).for_component("loopreads")
    loop = gateway.aio
    try:
        node = core.list_node().items[0].metadata.name
        labelled = f"kubernetes.io/hostname={node}"
        assert [n["metadata"]["name"] for n in await loop.list_nodes(labelled)] == [
            n.metadata.name for n in core.list_node(label_selector=labelled).items] == [node]
        driver = resource.list_resource_slice().items[0].spec.driver
        by_driver = f"spec.driver={driver}"
        assert sorted(s["metadata"]["name"] for s in await loop.list_slices(by_driver)) == sorted(
            s.metadata.name for s in resource.list_resource_slice(field_selector=by_driver).items)
        assert len(await loop.list_slices()) == len(resource.list_resource_slice().items)
        assert len(await loop.list_claims()) == len(resource.list_resource_claim_for_all_namespaces().items)
        assert await loop.list_taint_rules("podmedic.io/none=x") == []

        patched = await loop.patch_node(node, {"metadata": {"labels": {"podmedic-loop": "1"}}})
        assert patched["metadata"]["labels"]["podmedic-loop"] == core.read_node(node).metadata.labels["podmedic-loop"]
        await loop.patch_node(node, {"metadata": {"labels": {"podmedic-loop": None}}})
        assert "podmedic-loop" not in (core.read_node(node).metadata.labels or {})

        made = await loop.create_pod(ns, pod_manifest("loop-made"))
        with pytest.raises(Conflict):
            await loop.create_pod(ns, pod_manifest("loop-made"))
        await loop.delete_pod(ns, "loop-made", "uid-of-another-pod")  # the UID precondition: not this pod
        kept = core.read_namespaced_pod("loop-made", ns).metadata
        assert (kept.uid, kept.deletion_timestamp) == (made["metadata"]["uid"], None)
        await loop.delete_pod(ns, "loop-made", made["metadata"]["uid"], grace_s=0)
        assert "loop-made" not in {p.metadata.name for p in core.list_namespaced_pod(ns).items}
        await loop.delete_pod(ns, "loop-made", made["metadata"]["uid"])  # gone already: fine
    finally:
        gateway.close()


async def test_the_loops_recovery_calls_answer_as_the_generated_client(sim: SimCluster, api: client.ApiClient,
                                                                        ns: str) -> None:
    # The referee again: the generated CoreV1Api, BatchV1Api and ResourceV1Api. Pod reads of a gateway
    # with no caches go to the API server, so both sides ask it.
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    gateway = KubeGateway(Path(str(sim.kubeconfig_path))).for_component("looprecovery")
    loop = gateway.aio
    try:
        _pod(sim, api, ns, "loop-listed")
        core.patch_namespaced_pod("loop-listed", ns, {"metadata": {"labels": {"podmedic-loop": "listed"}}})
        selected = "podmedic-loop=listed"
        assert [p["metadata"]["name"] for p in await loop.list_pods(ns, selected)] == [
            p.metadata.name for p in core.list_namespaced_pod(ns, label_selector=selected).items] == ["loop-listed"]
        pods = core.list_pod_for_all_namespaces().items
        node = next(p.spec.node_name for p in pods if p.spec.node_name)
        assert sorted(p["metadata"]["uid"] for p in await loop.list_pods_on_node(node)) == sorted(
            p.metadata.uid for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items)

        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "loop-owner"},
               "spec": {"template": {"spec": {"restartPolicy": "Never",
                                              "containers": [{"name": "c", "image": "busybox"}]}}}}
        batch.create_namespaced_job(ns, job)
        owner = await loop.get_owner("batch/v1", "jobs", ns, "loop-owner")
        made = batch.read_namespaced_job("loop-owner", ns).metadata
        assert owner is not None and owner["metadata"]["uid"] == made.uid
        assert await loop.get_owner("batch/v1", "jobs", ns, "no-such-job") is None
        assert await loop.get_claim(ns, "no-such-claim") is None

        probed = await loop.probe_pod(ns, {"apiVersion": "v1", "kind": "Pod",
                                           "metadata": {"generateName": "loop-probe-"},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        assert probed["metadata"]["name"].startswith("loop-probe-")
        assert not [p for p in core.list_namespaced_pod(ns).items if p.metadata.name.startswith("loop-probe-")]

        await loop.put_hold(ns, "k1", "one", "incident-1")  # creates the ConfigMap
        await loop.put_hold(ns, "k2", "two", "incident-2")  # merges into it
        held = core.read_namespaced_config_map("podmedic-placement-holds", ns)
        assert held.data == {"k1": "one", "k2": "two"} and held.metadata.annotations["podmedic.io/changed-by"] == \
            "incident-2"
        await loop.drop_hold(ns, "k1")
        assert core.read_namespaced_config_map("podmedic-placement-holds", ns).data == {"k2": "two"}
        assert gateway.read_holds(ns) == {"k2": "two"}

        uid = core.read_namespaced_pod("loop-listed", ns).metadata.uid
        assert await loop.try_evict(ns, "loop-listed", "uid-of-a-replaced-pod") is None  # the precondition: gone
        assert core.read_namespaced_pod("loop-listed", ns).metadata.deletion_timestamp is None
        assert await loop.try_evict(ns, "loop-listed", uid) is None
        left = [p for p in core.list_namespaced_pod(ns).items if p.metadata.name == "loop-listed"]
        assert not left or left[0].metadata.deletion_timestamp is not None
    finally:
        gateway.close()
