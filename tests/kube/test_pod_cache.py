"""The worker's pod cache against the simulator over HTTP: reads without requests, never stale on a break.

The shape it copies is client-go's reflector (k8s.io/client-go/tools/cache/reflector.go): list, then
watch from the list's resourceVersion; a watch answered 410 Gone ("too old resource version") lists
again. What podmedic adds, and what these tests hold it to: a read is answered from memory only while
the watch is unbroken, and anything the cache cannot answer goes to the API server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from temporalio.testing import ActivityEnvironment

from activities.recovery.verify import poll
from podmedic.kube.gateway import Conflict, KubeGateway
from podmedic.kube.reflector import live_reads
from podmedic_sim import SimCluster
from podmedic_sim.audit import UNSCOPED
from tests.helpers import run_on_loop, wait_until
from tests.ingest_sources.conftest import start_pod


@pytest.fixture
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    """A gateway whose pod reads the cache answers (a short watch, so a broken one is noticed fast)."""
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)))
    gateway.start_caches("worker", watch_timeout_s=2, backoff_s=(0.3, 0.3))
    cache = gateway.pods
    assert cache is not None
    wait_until(lambda: cache.current, what="the pod cache listed and watching")
    yield gateway
    gateway.close()
    sim.clear_api_faults()


def _requests(sim: SimCluster, verb: str) -> int:
    return sum(int(e["count"]) for e in sim.ledger.entries()  # type: ignore[call-overload]
               if e["verb"] == verb and e["resource"] == "pods" and e["component"] == UNSCOPED)


def _annotate(api: client.ApiClient, pod: dict[str, str], value: str) -> None:
    client.CoreV1Api(api).patch_namespaced_pod(pod["name"], "default", {"metadata": {"annotations": {"t": value}}})


def _labelled(sim: SimCluster, api: client.ApiClient) -> dict[str, str]:
    pod = start_pod(sim, api)
    client.CoreV1Api(api).patch_namespaced_pod(pod["name"], "default", {"metadata": {"labels": {"app": pod["name"]}}})
    return pod


def test_reads_come_from_the_watch_and_follow_other_writers(sim: SimCluster, api: client.ApiClient,
                                                            kube: KubeGateway) -> None:
    pod = _labelled(sim, api)
    gets, lists = _requests(sim, "get"), _requests(sim, "list")
    _annotate(api, pod, "one")
    seen = wait_until(lambda: (p := kube.get_pod("default", pod["name"])) and
                      p["metadata"].get("annotations", {}).get("t") == "one" and p, what="the write seen")
    assert "managedFields" not in seen["metadata"]
    on_node = run_on_loop(kube, kube.aio.list_pods_on_node(pod["node"]))
    by_label = run_on_loop(kube, kube.aio.list_pods("default", f"app={pod['name']}"))
    assert pod["name"] in {p["metadata"]["name"] for p in on_node}
    # The API server's own answers to the same questions (the unmodified client, not podmedic's gateway).
    live = client.CoreV1Api(api).list_pod_for_all_namespaces(field_selector=f"spec.nodeName={pod['node']}")
    assert sorted(p["metadata"]["name"] for p in on_node) == sorted(p.metadata.name for p in live.items)
    assert [p["metadata"]["name"] for p in by_label] == [pod["name"]]
    assert (_requests(sim, "get"), _requests(sim, "list")) == (gets, lists), "answered without a request"


def test_a_set_based_selector_and_an_unknown_pod_are_asked_of_the_api_server(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    pod = _labelled(sim, api)
    wait_until(lambda: run_on_loop(kube, kube.aio.list_pods("default", f"app={pod['name']}")), what="the label seen")
    gets, lists = _requests(sim, "get"), _requests(sim, "list")
    assert kube.get_pod("default", "no-such-pod") is None
    found = run_on_loop(kube, kube.aio.list_pods("default", f"app in ({pod['name']})"))
    assert [p["metadata"]["name"] for p in found] == [pod["name"]]
    assert (_requests(sim, "get"), _requests(sim, "list")) == (gets + 1, lists + 1)


async def test_a_poll_takes_its_failing_verdict_from_the_api_server(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    # A watch may lag behind the API server (a busy worker, a slow stream); a poll that is about to
    # fail a rung looks once more, live. Here the check sees a change only when it reads live, as a
    # check on a lagging watch would.
    pod = start_pod(sim, api)
    wait_until(lambda: kube.get_pod("default", pod["name"]), what="the pod in the cache")
    gets = _requests(sim, "get")
    seen: list[int] = []

    async def check() -> str | None:
        before = _requests(sim, "get")
        found = await kube.aio.get_pod("default", pod["name"])
        seen.append(_requests(sim, "get") - before)
        return "live" if found is not None and seen[-1] else None

    # The SDK's ActivityEnvironment gives the poll a real activity context (its heartbeats, its logger).
    assert await ActivityEnvironment().run(poll, check, 0.5, 0.1) == "live"
    assert seen[-1] == 1 and sum(seen[:-1]) == 0 and len(seen) >= 3, seen
    with live_reads():
        kube.get_pod("default", pod["name"])
    kube.get_pod("default", pod["name"])
    assert _requests(sim, "get") == gets + 2


def test_a_broken_watch_sends_every_read_to_the_api_server_until_it_is_back(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    pod = start_pod(sim, api)
    cache = kube.pods
    assert cache is not None
    sim.add_api_fault(verbs=["watch"], resources=["pods"], disconnect_after_ms=1)
    sim.add_api_fault(verbs=["watch", "list"], resources=["pods"], components=["worker"], status=500)
    wait_until(lambda: not cache.current, what="the cache noticing its watch broke")
    _annotate(api, pod, "while-broken")
    gets = _requests(sim, "get")
    read = kube.get_pod("default", pod["name"])
    assert read is not None and read["metadata"]["annotations"]["t"] == "while-broken"
    assert _requests(sim, "get") == gets + 1, "read from the API server while the watch is broken"
    sim.clear_api_faults()
    wait_until(lambda: cache.current, timeout=15, what="the cache watching again")


def test_a_watch_too_far_behind_lists_again_and_misses_nothing(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    pod = start_pod(sim, api)
    cache = kube.pods
    assert cache is not None
    lists = cache.lists
    # Every watch of the worker's refused until the writes are done: the cache cannot resume in between,
    # however slowly the writes go, so its next watch names a version the history no longer holds.
    sim.add_api_fault(verbs=["watch"], resources=["pods"], components=["worker"], status=500)
    wait_until(lambda: not cache.current, what="the watch ended (it times out within 2 s) and refused")
    for i in range(60):  # more changes than the watch history holds
        _annotate(api, pod, f"v{i}")
    sim.clear_api_faults()
    wait_until(lambda: cache.lists > lists and cache.current, timeout=15, what="a relist after 410 Gone")
    wait_until(lambda: (p := kube.get_pod("default", pod["name"])) and p["metadata"]["annotations"]["t"] == "v59",
               what="the last write, from the new list")


def test_a_patch_naming_an_old_version_is_refused(sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    # The in-place restart writes its request only over the version it decided on (recover.py): the API
    # server's optimistic concurrency for a patch that names metadata.resourceVersion.
    pod = start_pod(sim, api)
    old = kube.get_pod("default", pod["name"], fresh=True)
    assert old is not None
    _annotate(api, pod, "moved-on")
    with pytest.raises(Conflict):
        kube.patch_pod_annotations("default", pod["name"], {"x": "y"},
                                   resource_version=old["metadata"]["resourceVersion"])


async def test_a_cached_read_on_the_loop_sends_nothing_and_a_missing_pod_is_asked_for(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    pod = start_pod(sim, api)
    wait_until(lambda: kube.get_pod("default", pod["name"]), what="the pod in the cache")
    gets, taken = _requests(sim, "get"), kube.limiter.taken
    assert (await kube.aio.get_pod("default", pod["name"]) or {})["metadata"]["name"] == pod["name"]
    assert (_requests(sim, "get"), kube.limiter.taken) == (gets, taken)  # no request, no token
    assert await kube.aio.get_pod("default", "no-such-pod") is None
    with live_reads():
        assert await kube.aio.get_pod("default", pod["name"]) is not None
    assert _requests(sim, "get") == gets + 2
