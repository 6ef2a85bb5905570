"""The engine's /sim/v1 routes and behaviours seen through HTTP and the unmodified client."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from podmedic_sim import SimCluster
from tests.simkit import fast_config


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    sim = SimCluster(fast_config())
    sim.start(kubeconfig_path=Path(tmp_path_factory.mktemp("routes")) / "kubeconfig")
    try:
        yield sim
    finally:
        sim.stop()


def _post(sim: SimCluster, path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(sim.url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _wait(check: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_device_fault_route_validates(cluster: SimCluster) -> None:
    dev = {"driver": "gpu.nvidia.com", "pool": "node-0001", "device": "gpu-2"}
    assert _post(cluster, "/sim/v1/faults/device", b"{not json")[0] == 400
    status, body = _post(cluster, "/sim/v1/faults/device", {**dev, "health": "Broken"})
    assert status == 400 and "health" in body["error"]
    status, body = _post(cluster, "/sim/v1/faults/device", {**dev, "device": "gpu-99", "health": "Unhealthy"})
    assert status == 404 and "gpu-99" in body["error"]
    status, body = _post(cluster, "/sim/v1/faults/device", {**dev, "health": "Unhealthy", "code": 79,
                                                             "reason": "XID", "message": "fell off the bus"})
    assert status == 200 and body["health"] == "Unhealthy" and body["node"] == "node-0001"
    state = cluster.state()
    entry = next(d for d in state["devices"] if (d["pool"], d["device"]) == ("node-0001", "gpu-2"))
    assert entry["code"] == 79 and entry["message"] == "fell off the bus"
    assert _post(cluster, "/sim/v1/faults/device", {**dev, "health": "Healthy"})[0] == 200


def test_slice_taint_route(cluster: SimCluster) -> None:
    dev = {"driver": "gpu.nvidia.com", "pool": "node-0000", "device": "gpu-3", "key": "gpu.nvidia.com/xid"}
    status, body = _post(cluster, "/sim/v1/faults/slice-taint", {**dev, "value": "79", "effect": "NoSchedule"})
    assert status == 200 and body["taints"][0]["effect"] == "NoSchedule"
    assert _post(cluster, "/sim/v1/faults/slice-taint", {**dev, "effect": "Sometimes"})[0] == 400
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    try:
        rs = client.ResourceV1Api(api).read_resource_slice("node-0000-gpu.nvidia.com")
        taints = rs.spec.devices[3].taints
        assert taints[0].key == "gpu.nvidia.com/xid" and taints[0].value == "79"
    finally:
        api.close()
    status, body = _post(cluster, "/sim/v1/faults/slice-taint", {**dev, "remove": True})
    assert status == 200 and body["taints"] == []


def test_training_route_and_client_view(cluster: SimCluster) -> None:
    status, job = _post(cluster, "/sim/v1/workloads/training", {"name": "web-train"})
    assert status == 201 and job["metadata"]["name"] == "web-train"
    assert _post(cluster, "/sim/v1/workloads/training", {"name": "web-train"})[0] == 409
    assert _post(cluster, "/sim/v1/workloads/training", {"name": "Bad_Name"})[0] == 400
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    try:
        core = client.CoreV1Api(api)

        def ready_pod() -> Any:
            pods = core.list_namespaced_pod("default", label_selector="job-name=web-train").items
            return next((p for p in pods if p.status.phase == "Running" and p.status.container_statuses
                         and p.status.container_statuses[0].ready), None)

        pod = _wait(ready_pod)
        ars = pod.status.container_statuses[0].allocated_resources_status
        # The training pod's container references its claim without a request, and gpu.nvidia.com's
        # plugin gives CDI IDs: the device is found through the claim (pkg/kubelet/cm/dra/manager.go).
        assert ars[0].name == "claim:gpu" and ars[0].resources[0].health == "Healthy"
        assert ars[0].resources[0].resource_id.startswith("k8s.gpu.nvidia.com/device=")
        claim_name = pod.status.resource_claim_statuses[0].resource_claim_name
        claim = client.ResourceV1Api(api).read_namespaced_resource_claim(claim_name, "default")
        result = claim.status.allocation.devices.results[0]
        driver, pool, device = result.driver, result.pool, result.device
        cluster.set_device_health(driver, pool, device, "Unhealthy", code=79, message="XID 79")

        def unhealthy() -> bool:
            p = core.read_namespaced_pod(pod.metadata.name, "default")
            statuses = p.status.container_statuses or []
            return bool(statuses and statuses[0].allocated_resources_status[0].resources[0].health == "Unhealthy")

        _wait(unhealthy)
        job_state = next(j for j in cluster.state()["jobs"] if j["name"] == "web-train")
        assert job_state["training"] and job_state["pods_created"] == 1
    finally:
        api.close()


def test_plugin_device_route_changes_node_allocatable_and_refuses_unknown_devices(tmp_path: Path) -> None:
    # Node capacity keeps every device, allocatable only the healthy ones (pkg/kubelet/cm/devicemanager
    # manager.go, GetCapacity), read back through the unmodified client.
    sim = SimCluster(fast_config(nodes=1, device_plugins={"nvidia.com/gpu": 2}))
    sim.start(kubeconfig_path=tmp_path / "kubeconfig")
    try:
        device = sim.call(lambda: sim.engine.plugin_devices.ids("node-0000", "nvidia.com/gpu"))[0]
        body = {"node": "node-0000", "resource": "nvidia.com/gpu", "device": device, "health": "Unhealthy"}
        assert _post(sim, "/sim/v1/faults/plugin-device", body) == (200, body)
        api = client.CoreV1Api(config.new_client_from_config(str(sim.kubeconfig_path)))
        status = api.read_node("node-0000").status
        assert (status.capacity["nvidia.com/gpu"], status.allocatable["nvidia.com/gpu"]) == ("2", "1")
        code, answer = _post(sim, "/sim/v1/faults/plugin-device", {**body, "device": "GPU-nope"})
        assert code == 404 and "no nvidia.com/gpu device GPU-nope" in answer["error"]
        code, answer = _post(sim, "/sim/v1/faults/plugin-device", {**body, "health": "Unknown"})
        assert code == 400 and "health" in answer["error"]
    finally:
        sim.stop()
