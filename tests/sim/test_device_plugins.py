"""Device-plugin resources (``nvidia.com/gpu`` as an extended resource) as the real kubelet keeps them.

Upstream, kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go:
- ``GetCapacity``: capacity counts healthy and unhealthy devices, allocatable only the healthy ones.
- ``allocateContainerResources``: devices come from ``resources.limits`` at admission, among healthy
  devices not in use; too few fails admission (pkg/kubelet/lifecycle ``UnexpectedAdmissionError``,
  message "Allocate failed due to requested number of devices unavailable for ...").
- ``UpdateAllocatedResourcesStatus``: an entry named after the resource (no ``claim:`` prefix),
  ``resourceID`` the plugin's device ID, health ``Healthy`` or else ``Unhealthy``, no message.
"""

from __future__ import annotations

from typing import Any

import pytest

from podmedic.domain.base import Obj
from podmedic_sim.engine import SimEngine
from tests.simkit import fast_config, running_engine, wait_until

GPU = "nvidia.com/gpu"


def _pod(name: str, gpus: int, node: str | None = None) -> Obj:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.local/trainer:1",
                                             "resources": {"limits": {GPU: str(gpus)}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _entries(engine: SimEngine, pod: str) -> list[Any]:
    status = engine.store.get("pods", "default", pod).get("status") or {}
    return [e for c in status.get("containerStatuses") or [] for e in c.get("allocatedResourcesStatus") or []]


def _node_counts(engine: SimEngine, node: str) -> tuple[str, str]:
    status = engine.store.get("nodes", None, node)["status"]
    return status["capacity"][GPU], status["allocatable"][GPU]


async def test_the_pods_devices_are_reported_under_the_resource_name_and_follow_the_plugins_health() -> None:
    async with running_engine(fast_config(nodes=1, device_plugins={GPU: 2})) as engine:
        engine.store.create("pods", _pod("p", 1))
        await wait_until(lambda: _entries(engine, "p"), what="allocatedResourcesStatus")
        [entry] = _entries(engine, "p")
        assert entry["name"] == GPU
        [device] = entry["resources"]
        assert device["resourceID"].startswith("GPU-") and device["health"] == "Healthy"
        assert _node_counts(engine, "node-0000") == ("2", "2")

        engine.set_plugin_device_health("node-0000", GPU, device["resourceID"], "Unhealthy")
        await wait_until(lambda: _entries(engine, "p")[0]["resources"][0]["health"] == "Unhealthy",
                         what="Unhealthy in pod status")
        assert "message" not in _entries(engine, "p")[0]["resources"][0]
        assert _node_counts(engine, "node-0000") == ("2", "1"), "capacity keeps it, allocatable drops it"

        engine.set_plugin_device_health("node-0000", GPU, device["resourceID"], "Healthy")
        await wait_until(lambda: _entries(engine, "p")[0]["resources"][0]["health"] == "Healthy", what="Healthy")
        assert _node_counts(engine, "node-0000") == ("2", "2")


async def test_the_scheduler_counts_allocatable_minus_what_pods_hold() -> None:
    async with running_engine(fast_config(nodes=1, device_plugins={GPU: 2})) as engine:
        engine.store.create("pods", _pod("a", 1))
        await wait_until(lambda: _entries(engine, "a"), what="a running")
        held = _entries(engine, "a")[0]["resources"][0]["resourceID"]
        spare = next(d for d in engine.plugin_devices.ids("node-0000", GPU) if d != held)
        engine.set_plugin_device_health("node-0000", GPU, spare, "Unhealthy")
        engine.store.create("pods", _pod("b", 1))

        def unschedulable() -> str | None:
            conds = engine.store.get("pods", "default", "b").get("status", {}).get("conditions") or []
            return next((c["message"] for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"), None)

        message = await wait_until(unschedulable, what="b unschedulable")
        assert f"Insufficient {GPU}" in message
        engine.set_plugin_device_health("node-0000", GPU, spare, "Healthy")
        await wait_until(lambda: _entries(engine, "b"), what="b scheduled once the device is healthy")
        assert _entries(engine, "b")[0]["resources"][0]["resourceID"] == spare


async def test_a_pod_bound_past_the_scheduler_fails_admission_when_too_few_devices_are_healthy() -> None:
    async with running_engine(fast_config(nodes=1, device_plugins={GPU: 1})) as engine:
        [only] = engine.plugin_devices.ids("node-0000", GPU)
        engine.set_plugin_device_health("node-0000", GPU, only, "Unhealthy")
        engine.store.create("pods", _pod("pinned", 1, node="node-0000"))
        await wait_until(lambda: (engine.store.get("pods", "default", "pinned").get("status") or {}).get("phase")
                         == "Failed", what="admission failure")
        status = engine.store.get("pods", "default", "pinned")["status"]
        assert status["reason"] == "UnexpectedAdmissionError"
        assert status["message"].startswith(f"Allocate failed due to requested number of devices unavailable for {GPU}")


async def test_a_device_the_plugin_does_not_list_is_refused() -> None:
    async with running_engine(fast_config(nodes=1, device_plugins={GPU: 1})) as engine:
        with pytest.raises(KeyError, match=r"no nvidia\.com/gpu device GPU-nope"):
            engine.set_plugin_device_health("node-0000", GPU, "GPU-nope", "Unhealthy")
