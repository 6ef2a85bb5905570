"""Scheduler and topology of the simulated cluster, driven directly against the store."""

from __future__ import annotations

import time
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.engine import SimEngine
from tests.simkit import fast_config, gpu_pod, gpu_template, running_engine, wait_until


def _pod(engine: SimEngine, name: str) -> Obj | None:
    return engine.store.find("pods", "default", name)


def _bound(engine: SimEngine, name: str) -> str | None:
    pod = _pod(engine, name)
    return pod["spec"].get("nodeName") if pod else None


def _devices(engine: SimEngine, name: str) -> list[str]:
    pod = engine.store.get("pods", "default", name)
    return ["/".join(d) for _, _, d in engine.claims.pod_devices(pod)]


def _events(engine: SimEngine, name: str, reason: str) -> list[Obj]:
    return [e for e in engine.store.list("events", "default")
            if e["involvedObject"]["name"] == name and e["reason"] == reason]


def _rule(name: str, effect: str, **selector: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", **selector},
                     "taint": {"key": "podmedic.io/unhealthy", "value": "true", "effect": effect}}}


async def test_bootstrap_follows_the_naming_contract() -> None:
    async with running_engine(fast_config(nodes=3, devices_per_node=2)) as engine:
        store = engine.store
        assert [n["metadata"]["name"] for n in store.list("nodes")] == ["node-0000", "node-0001", "node-0002"]
        node = store.get("nodes", None, "node-0001")
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "node-0001"
        assert node["status"]["conditions"][0]["type"] == "Ready"
        rs = store.get("resourceslices", None, "node-0001-gpu.nvidia.com")
        assert rs["spec"]["pool"] == {"name": "node-0001", "generation": 1, "resourceSliceCount": 1}
        assert [d["name"] for d in rs["spec"]["devices"]] == ["gpu-0", "gpu-1"]
        assert rs["spec"]["devices"][1]["attributes"]["index"] == {"int": 1}
        assert store.get("deviceclasses", None, "gpu.nvidia.com")["spec"]["selectors"][0]["cel"]["expression"] == (
            'device.driver == "gpu.nvidia.com"')
        assert store.find("namespaces", None, "kube-system") is not None


async def test_bootstrap_of_a_large_cluster_is_fast() -> None:
    started = time.monotonic()
    async with running_engine(fast_config(nodes=2000, devices_per_node=8)) as engine:
        assert len(engine.devices.slices) == 2000
    assert time.monotonic() - started < 10


async def test_claim_created_from_template_and_allocated() -> None:
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template(count=2))
        engine.store.create("pods", gpu_pod("p1"))
        await wait_until(lambda: _bound(engine, "p1"), what="binding")
        pod = engine.store.get("pods", "default", "p1")
        (status,) = pod["status"]["resourceClaimStatuses"]
        claim = engine.store.get("resourceclaims", "default", status["resourceClaimName"])
        assert claim["metadata"]["name"].startswith("p1-gpu-") and len(claim["metadata"]["name"]) == len("p1-gpu-") + 5
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
        assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [r["request"] for r in results] == ["gpu", "gpu"]
        assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p1", "uid": pod["metadata"]["uid"]}]
        assert _events(engine, "p1", "Scheduled")


async def test_device_taints_block_unless_tolerated() -> None:
    async with running_engine(fast_config(nodes=1, devices_per_node=2)) as engine:
        store = engine.store
        store.create("devicetaintrules", _rule("r0", "NoSchedule", pool="node-0000", device="gpu-0"))
        engine.set_slice_taint("gpu.nvidia.com", "node-0000", "gpu-1", "gpu.nvidia.com/xid", "79", "NoExecute")
        store.create("resourceclaimtemplates", gpu_template())
        store.create("pods", gpu_pod("blocked"))
        await wait_until(lambda: _events(engine, "blocked", "FailedScheduling"), what="FailedScheduling")
        assert "cannot allocate all claims" in _events(engine, "blocked", "FailedScheduling")[0]["message"]
        store.create("resourceclaimtemplates", gpu_template(
            "tolerant", tolerations=[{"key": "podmedic.io/unhealthy", "operator": "Exists"}]))
        store.create("pods", gpu_pod("tolerant", template="tolerant"))
        await wait_until(lambda: _bound(engine, "tolerant"), what="tolerant pod bound")
        assert _devices(engine, "tolerant") == ["gpu.nvidia.com/node-0000/gpu-0"]
        engine.set_slice_taint("gpu.nvidia.com", "node-0000", "gpu-1", "gpu.nvidia.com/xid", "79", "None")
        await wait_until(lambda: _bound(engine, "blocked"), what="effect None never blocks")
        assert _devices(engine, "blocked") == ["gpu.nvidia.com/node-0000/gpu-1"]


async def test_cordon_and_node_taints() -> None:
    async with running_engine() as engine:
        store = engine.store
        store.mutate("nodes", None, "node-0000", lambda n: n["spec"].update(unschedulable=True))
        store.mutate("nodes", None, "node-0001", lambda n: n["spec"].update(
            taints=[{"key": "maintenance", "value": "x", "effect": "NoSchedule"}]))
        store.create("resourceclaimtemplates", gpu_template())
        store.create("pods", gpu_pod("p"))
        await wait_until(lambda: _events(engine, "p", "FailedScheduling"), what="FailedScheduling")
        message = _events(engine, "p", "FailedScheduling")[0]["message"]
        assert "1 node(s) were unschedulable" in message and "untolerated taint {maintenance: x}" in message
        cond = next(c for c in _pod(engine, "p")["status"]["conditions"] if c["type"] == "PodScheduled")  # type: ignore[index]
        assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
        store.create("pods", gpu_pod("q", tolerations=[{"key": "maintenance", "operator": "Exists"}]))
        await wait_until(lambda: _bound(engine, "q") == "node-0001", what="tolerating pod on node-0001")
        store.mutate("nodes", None, "node-0000", lambda n: n["spec"].pop("unschedulable"))
        await wait_until(lambda: _bound(engine, "p") == "node-0000", what="uncordon lets p schedule")


async def test_node_affinity_required_and_preferred() -> None:
    async with running_engine(fast_config(nodes=3)) as engine:
        store = engine.store
        store.create("resourceclaimtemplates", gpu_template())
        pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0002"]}]}]}}}
        store.create("pods", gpu_pod("pinned", affinity=pinned))
        labelled = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                                   "values": ["node-0000"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {
                "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                      "values": ["node-0001"]}]}}]}}
        store.create("pods", gpu_pod("preferring", affinity=labelled))
        await wait_until(lambda: _bound(engine, "pinned") and _bound(engine, "preferring"), what="both bound")
        assert _bound(engine, "pinned") == "node-0002"
        assert _bound(engine, "preferring") == "node-0001"
        nowhere = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-9999"]}]}]}}}
        store.create("pods", gpu_pod("nowhere", affinity=nowhere))
        await wait_until(lambda: _events(engine, "nowhere", "FailedScheduling"), what="FailedScheduling")
        message = _events(engine, "nowhere", "FailedScheduling")[0]["message"]
        assert "didn't match Pod's node affinity/selector" in message


async def test_image_locality_and_pull_delay() -> None:
    config = fast_config(nodes=3)
    async with running_engine(config) as engine:
        store = engine.store
        store.create("resourceclaimtemplates", gpu_template())
        store.create("pods", gpu_pod("first", image="registry.local/big:2"))
        await wait_until(lambda: _bound(engine, "first"), what="first bound")
        started = time.monotonic()
        await wait_until(lambda: (_pod(engine, "first") or {}).get("status", {}).get("phase") == "Running",
                         what="first running")
        node = _bound(engine, "first")
        assert time.monotonic() - started >= config.timings.image_pull_s * 0.8
        images = store.get("nodes", None, node)["status"]["images"]
        assert any("registry.local/big:2" in i["names"] for i in images)
        assert _events(engine, "first", "Pulling") and _events(engine, "first", "Pulled")
        # Fill nothing else: the second pod prefers the node that already has the image.
        other = "node-0002" if node != "node-0002" else "node-0000"
        store.mutate("nodes", None, other, lambda n: n["status"]["images"].append(
            {"names": ["registry.local/other:1"], "sizeBytes": 1}))
        store.create("pods", gpu_pod("second", image="registry.local/big:2"))
        store.create("pods", gpu_pod("third", image="registry.local/other:1"))
        await wait_until(lambda: _bound(engine, "second") and _bound(engine, "third"), what="bound")
        assert _bound(engine, "second") == node
        assert _bound(engine, "third") == other
        await wait_until(lambda: (_pod(engine, "second") or {}).get("status", {}).get("phase") == "Running",
                         what="second running")
        assert "already present" in _events(engine, "second", "Pulled")[0]["message"]
        assert not _events(engine, "second", "Pulling"), "the image was on the node: no pull"


async def test_allocated_devices_are_not_shared_and_are_freed() -> None:
    async with running_engine(fast_config(nodes=1, devices_per_node=2)) as engine:
        store = engine.store
        store.create("resourceclaimtemplates", gpu_template())
        for name in ("a", "b", "c"):
            store.create("pods", gpu_pod(name))
        await wait_until(lambda: _bound(engine, "a") and _bound(engine, "b"), what="two bound")
        await wait_until(lambda: _events(engine, "c", "FailedScheduling"), what="third unschedulable")
        assert sorted(_devices(engine, "a") + _devices(engine, "b")) == [
            "gpu.nvidia.com/node-0000/gpu-0", "gpu.nvidia.com/node-0000/gpu-1"]
        freed = _devices(engine, "a")
        engine.delete_pod("default", "a")
        await wait_until(lambda: _bound(engine, "c"), what="c bound after a is gone")
        assert _devices(engine, "c") == freed
        assert _pod(engine, "a") is None
        assert not [c for c in store.list("resourceclaims", "default") if c["metadata"]["name"].startswith("a-")]
