"""Watches through ``kubernetes.watch.Watch``: resume, bookmarks, selectors, 410 Gone."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from kubernetes import client, watch

from podmedic_sim import SimCluster
from podmedic_sim.handlers_request import Target
from podmedic_sim.resources import RESOURCES
from podmedic_sim.store import WatchEvent
from podmedic_sim.watch import _pump
from tests.sim.conftest import Raw, pod_manifest


def _later(fn: Any, *args: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(0.2)
        fn(*args)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_watch_from_resource_version(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("before"))
    rv = v1.list_namespaced_pod(ns).metadata.resource_version
    thread = _later(
        lambda: (
            v1.create_namespaced_pod(ns, pod_manifest("after")),
            v1.patch_namespaced_pod("after", ns, {"metadata": {"labels": {"a": "b"}}}),
            v1.delete_namespaced_pod("after", ns, grace_period_seconds=0),  # bound to no real node: no kubelet ends it
        )
    )
    seen = []
    w = watch.Watch()
    for event in w.stream(v1.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            w.stop()
    thread.join()
    # The simulated kubelet/scheduler may add MODIFIED events of their own in between.
    assert seen[0] == ("ADDED", "after") and seen[-1] == ("DELETED", "after")
    assert ("MODIFIED", "after") in seen[1:-1]


def test_watch_without_version_lists_first(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("one"))
    w = watch.Watch()
    for event in w.stream(v1.list_namespaced_pod, ns, timeout_seconds=5):
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "one")
        w.stop()


def test_cluster_wide_watch_with_selectors_and_bookmarks(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    thread = _later(
        lambda: (
            v1.create_namespaced_pod(ns, pod_manifest("skip", {"app": "no"})),
            v1.create_namespaced_pod(ns, pod_manifest("keep", {"app": "yes"})),
        )
    )
    kinds, names = [], []
    w = watch.Watch()
    for event in w.stream(
        v1.list_pod_for_all_namespaces,
        resource_version=rv,
        label_selector="app=yes",
        field_selector=f"metadata.namespace={ns}",
        allow_watch_bookmarks=True,
        timeout_seconds=5,
    ):
        kinds.append(event["type"])
        if event["type"] == "ADDED":
            names.append(event["object"].metadata.name)
        if "ADDED" in kinds and kinds[-1] == "BOOKMARK":
            w.stop()
    thread.join()
    assert names == ["keep"]
    assert int(w.resource_version) >= int(rv)


def test_watch_timeout_ends_the_stream(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    rv = v1.list_namespaced_pod(ns).metadata.resource_version
    start = time.monotonic()
    events = list(
        watch.Watch().stream(v1.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=1)
    )
    assert events == []
    assert 0.9 <= time.monotonic() - start < 30  # a lower bound that load cannot break; the upper one generous


def test_expired_resource_version_is_410(
    api: client.ApiClient, sim: SimCluster, raw: Raw, ns: str
) -> None:
    v1 = client.CoreV1Api(api)
    old_rv = v1.list_namespaced_pod(ns).metadata.resource_version
    size = sim.store.history_size
    sim.call(setattr, sim.store, "history_size", 5)
    try:
        for i in range(10):
            v1.create_namespaced_pod(ns, pod_manifest(f"churn-{i}"))
    finally:
        sim.call(setattr, sim.store, "history_size", size)
    status, text = raw("GET", f"/api/v1/namespaces/{ns}/pods?watch=true&resourceVersion={old_rv}")
    assert status == 200
    assert text["type"] == "ERROR" and text["object"]["code"] == 410
    assert text["object"]["reason"] == "Expired"
    with pytest.raises(client.ApiException) as err:
        for _ in watch.Watch().stream(
            v1.list_namespaced_pod, ns, resource_version=old_rv, timeout_seconds=2
        ):
            pass
    assert err.value.status == 410


def test_watch_of_resource_api(api: client.ApiClient) -> None:
    r1 = client.ResourceV1Api(api)
    rv = r1.list_device_taint_rule().metadata.resource_version
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "watched"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com"},
            "taint": {"key": "podmedic.io/unhealthy", "effect": "None"},
        },
    }
    thread = _later(r1.create_device_taint_rule, rule)
    w = watch.Watch()
    for event in w.stream(r1.list_device_taint_rule, resource_version=rv, timeout_seconds=5):
        assert event["object"].metadata.name == "watched"
        w.stop()
    thread.join()
    r1.delete_device_taint_rule("watched")


async def test_a_bookmark_never_overtakes_a_queued_event() -> None:
    """Upstream's cacher sends bookmarks through the same ordered channel as events (cacher.go
    ``dispatchEvents``), so a bookmark's resourceVersion is never ahead of an event the watcher has
    not been sent. Here a change is queued just as a bookmark falls due (interval 0): the event must
    go out first, else a client records resourceVersion 5 before processing the change at 5."""
    pods = next(r for r in RESOURCES if r.plural == "pods")
    written: list[dict[str, Any]] = []

    class Sink:
        async def write(self, data: bytes) -> None:
            written.extend(json.loads(line) for line in data.splitlines())

    queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
    queue.put_nowait(WatchEvent("MODIFIED", "pods", {"metadata": {"name": "p", "resourceVersion": "5"}}, 5))
    await _pump(Sink(), queue, time.monotonic() + 0.3, True, 0.0,  # type: ignore[arg-type]
                Target(pods, "default", None, None), lambda: 5)
    assert written[0]["type"] == "MODIFIED", [e["type"] for e in written[:3]]
    assert any(e["type"] == "BOOKMARK" for e in written), "bookmarks still flow once the queue is empty"
