"""Simulated kubelet: readiness, device health in allocatedResourcesStatus, crash loops,
restart policies, graceful deletion.

The allocatedResourcesStatus shape is the kubelet's (kubernetes/kubernetes
pkg/kubelet/cm/dra/manager.go, ``UpdateAllocatedResourcesStatus``): one entry per claim the
container references, ``claim:<name>`` or ``claim:<name>/<request>`` when the reference names a
request, listing every device of the claim, each under the driver's first CDI device ID when it
returned one (``<driver>/<pool>/<device>`` otherwise); ``message`` only when the driver sends one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podmedic_sim.config import DriverPlugin
from podmedic_sim.engine import SimEngine
from tests.simkit import fast_config, gpu_pod, gpu_template, running_engine, wait_until


def _status(engine: SimEngine, name: str) -> dict[str, Any]:
    pod = engine.store.find("pods", "default", name)
    return (pod or {}).get("status") or {}


def _container(engine: SimEngine, name: str) -> dict[str, Any]:
    statuses = _status(engine, name).get("containerStatuses") or [{}]
    return dict(statuses[0])


def _ready(engine: SimEngine, name: str) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in _status(engine, name).get("conditions") or [])


def _device(engine: SimEngine, name: str) -> tuple[str, str, str]:
    pod = engine.store.get("pods", "default", name)
    return engine.claims.pod_devices(pod)[0][2]


async def _started(engine: SimEngine, name: str, **spec: Any) -> tuple[str, str, str]:
    if engine.store.find("resourceclaimtemplates", "default", "gpu") is None:
        engine.store.create("resourceclaimtemplates", gpu_template())
    engine.store.create("pods", gpu_pod(name, **spec))
    await wait_until(lambda: _ready(engine, name), what=f"{name} Ready")
    return _device(engine, name)


async def test_pod_becomes_ready_with_healthy_devices() -> None:
    async with running_engine() as engine:
        dev = await _started(engine, "p")
        status = _status(engine, "p")
        assert status["phase"] == "Running" and status["podIP"] and status["hostIP"]
        c = _container(engine, "p")
        assert c["ready"] and c["restartCount"] == 0 and "running" in c["state"]
        claim = engine.store.get("resourceclaims", "default", engine.claims.pod_devices(
            engine.store.get("pods", "default", "p"))[0][0])
        cdi = f"k8s.gpu.nvidia.com/device={claim['metadata']['uid']}-{dev[2]}"  # the default gpu.nvidia.com plugin
        assert c["allocatedResourcesStatus"] == [
            {"name": "claim:gpu", "resources": [{"resourceID": cdi, "health": "Healthy"}]}]


@pytest.mark.parametrize(("plugin", "expected"), [
    (DriverPlugin(cdi_ids="none"), lambda dev, uid: ["/".join(dev)]),
    (DriverPlugin(cdi_ids="per-device", cdi_kind="example.com/gpu"),
     lambda dev, uid: [f"example.com/gpu={uid}-{dev[2]}"]),
    (DriverPlugin(cdi_ids="shared", cdi_kind="nvidia.com/gpu"), lambda dev, uid: ["nvidia.com/gpu=all"]),
], ids=["plain", "per-device", "shared"])
async def test_each_plugin_mode_names_devices_as_its_driver_would(plugin: DriverPlugin, expected: Any) -> None:
    config = fast_config(plugins={"gpu.nvidia.com": plugin})
    async with running_engine(config) as engine:
        engine.store.create("resourceclaimtemplates", gpu_template(count=2))
        claims = {"claims": [{"name": "gpu", "request": "gpu"}]}
        engine.store.create("pods", gpu_pod("p", containers=[
            {"name": "main", "image": "registry.local/app:1", "resources": claims}]))
        await wait_until(lambda: _ready(engine, "p"), what="p Ready")
        devices = engine.claims.pod_devices(engine.store.get("pods", "default", "p"))
        uid = engine.store.get("resourceclaims", "default", devices[0][0])["metadata"]["uid"]
        entry = _container(engine, "p")["allocatedResourcesStatus"]
        assert [e["name"] for e in entry] == ["claim:gpu/gpu"]  # the reference names the request
        # One element per resourceID: a shared CDI ID once (manager.go skips a resourceID already added).
        wanted = sorted({rid for _, _, dev in devices for rid in expected(dev, uid)})
        assert sorted(r["resourceID"] for r in entry[0]["resources"]) == wanted


async def test_a_driver_without_the_health_service_has_every_device_unknown() -> None:
    """pkg/kubelet/cm/dra/healthinfo.go getHealthInfo: a device the driver never reported is Unknown."""
    config = fast_config(plugins={"gpu.nvidia.com": DriverPlugin(cdi_ids="per-device", health_service=False)})
    async with running_engine(config) as engine:
        dev = await _started(engine, "p")
        assert _container(engine, "p")["allocatedResourcesStatus"][0]["resources"][0]["health"] == "Unknown"
        engine.set_device_health(*dev, health="Unhealthy", code=79)
        await asyncio.sleep(0.3)  # several kubelet reports
        assert _container(engine, "p")["allocatedResourcesStatus"][0]["resources"][0]["health"] == "Unknown"


@pytest.mark.parametrize("plugin", [None, DriverPlugin(cdi_ids="per-device", health_messages=True)])
async def test_health_messages_only_when_the_driver_sends_them(plugin: DriverPlugin | None) -> None:
    """ResourceHealth.message (k8s.io/api core/v1 types.go) is filled by the kubelet only with the
    ResourceHealthStatusMessage gate on and a DRA plugin that returns a message; null otherwise."""
    config = fast_config(**({"plugins": {"gpu.nvidia.com": plugin}} if plugin else {}))
    async with running_engine(config) as engine:
        dev = await _started(engine, "p")
        engine.set_device_health(*dev, health="Unhealthy", code=79, message="XID 79: fallen off the bus")
        await wait_until(lambda: _container(engine, "p")["allocatedResourcesStatus"][0]["resources"][0]["health"]
                         == "Unhealthy", what="Unhealthy reported")
        resource = _container(engine, "p")["allocatedResourcesStatus"][0]["resources"][0]
        assert resource.get("message") == ("XID 79: fallen off the bus" if plugin else None)


async def test_allocated_resources_status_follows_health_without_crash() -> None:
    async with running_engine() as engine:
        dev = await _started(engine, "p")

        def health() -> str:
            return str(_container(engine, "p")["allocatedResourcesStatus"][0]["resources"][0]["health"])

        engine.set_device_health(*dev, health="Unhealthy", reason="XID", code=79, message="XID 79: fallen off the bus")
        await wait_until(lambda: health() == "Unhealthy", what="Unhealthy reported")
        resource = _container(engine, "p")["allocatedResourcesStatus"][0]["resources"][0]
        assert "message" not in resource  # the default driver sends none (test below)
        engine.set_device_health(*dev, health="Unknown")
        await wait_until(lambda: health() == "Unknown", what="Unknown reported")
        engine.set_device_health(*dev, health="Healthy")
        await wait_until(lambda: health() == "Healthy", what="Healthy reported")
        c = _container(engine, "p")
        assert c["restartCount"] == 0 and c["ready"]


async def test_crashing_fault_crash_loops_with_doubling_back_off() -> None:
    async with running_engine() as engine:
        dev = await _started(engine, "p")
        engine.set_device_health(*dev, health="Unhealthy", code=79, crash=True)
        await wait_until(lambda: _container(engine, "p")["state"].get("waiting", {}).get("reason")
                         == "CrashLoopBackOff",
                         what="CrashLoopBackOff")
        c = _container(engine, "p")
        assert c["lastState"]["terminated"]["exitCode"] == 134 and not c["ready"]
        await asyncio.sleep(1.2)
        restarts = _container(engine, "p")["restartCount"]
        # Back-off 0.1, 0.2, 0.4, 0.4 ... (plus start time): a handful, not dozens.
        assert 2 <= restarts <= 6
        backoffs = [e for e in engine.store.list("events", "default") if e["reason"] == "BackOff"]
        assert backoffs and backoffs[0]["type"] == "Warning" and backoffs[0]["count"] >= 2
        engine.set_device_health(*dev, health="Healthy")
        await wait_until(lambda: _ready(engine, "p"), what="Ready after the fault clears")
        assert _status(engine, "p")["phase"] == "Running"


async def test_transient_fault_clears_on_restart() -> None:
    async with running_engine() as engine:
        dev = await _started(engine, "p")
        engine.set_device_health(*dev, health="Unhealthy", crash=True, clears_on_restart=True)
        await wait_until(lambda: _container(engine, "p")["restartCount"] == 1 and _ready(engine, "p"),
                         what="one restart then Ready")
        assert engine.devices.fault(dev).health == "Healthy"
        await asyncio.sleep(0.3)
        assert _container(engine, "p")["restartCount"] == 1


async def test_restart_policy_never_fails_the_pod_and_releases_devices() -> None:
    async with running_engine() as engine:
        dev = await _started(engine, "p", restart_policy="Never")
        engine.set_device_health(*dev, health="Unhealthy", crash=True)
        await wait_until(lambda: _status(engine, "p").get("phase") == "Failed", what="pod Failed")
        assert _container(engine, "p")["state"]["terminated"]["exitCode"] == 134
        await wait_until(lambda: dev not in engine.claims.owner, what="device released")


async def test_restart_policy_rules_restart_in_place() -> None:
    rules = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [134]}}]
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        pod = gpu_pod("p", restart_policy="Never")
        pod["spec"]["containers"][0].update(restartPolicy="Never", restartPolicyRules=rules)
        engine.store.create("pods", pod)
        await wait_until(lambda: _ready(engine, "p"), what="Ready")
        uid = engine.store.get("pods", "default", "p")["metadata"]["uid"]
        dev = _device(engine, "p")
        engine.set_device_health(*dev, health="Unhealthy", crash=True, clears_on_restart=True)
        await wait_until(lambda: _container(engine, "p")["restartCount"] == 1 and _ready(engine, "p"),
                         what="restarted in place")
        assert engine.store.get("pods", "default", "p")["metadata"]["uid"] == uid
        assert _status(engine, "p")["phase"] == "Running"


async def test_on_failure_does_not_restart_success() -> None:
    async with running_engine() as engine:
        await _started(engine, "p", restart_policy="OnFailure")
        rt = engine.kubelet.pods[("default", "p")]
        engine.kubelet.exit_container(rt, rt.containers[0], 0, "Completed")
        await wait_until(lambda: _status(engine, "p").get("phase") == "Succeeded", what="Succeeded")
        assert _container(engine, "p")["restartCount"] == 0


async def test_graceful_deletion_kills_then_removes() -> None:
    async with running_engine() as engine:
        dev = await _started(engine, "p")
        engine.delete_pod("default", "p")
        pod = engine.store.get("pods", "default", "p")
        assert "deletionTimestamp" in pod["metadata"]
        await wait_until(lambda: engine.store.find("pods", "default", "p") is None, what="pod removed")
        assert any(e["reason"] == "Killing" for e in engine.store.list("events", "default"))
        assert dev not in engine.claims.owner
        assert engine.store.list("resourceclaims", "default") == []


@pytest.mark.parametrize(("rules", "gates", "reported"), [
    ("v1", {}, True), ("v1beta2", {}, True), ("v1alpha3", {}, False),
    ("v1alpha3", {"ResourceHealthStatus": True}, True), ("v1", {"ResourceHealthStatus": False}, False),
], ids=["1.37", "1.36", "1.35", "1.35-gate-on", "1.37-gate-off"])
async def test_device_health_reaches_the_pod_only_with_the_resource_health_status_gate(
        rules: str, gates: dict[str, bool], reported: bool) -> None:
    """KEP-4680: ResourceHealthStatus is alpha (off) through 1.35 and beta (on) from 1.36; off, the kubelet
    writes no allocatedResourcesStatus (pkg/kubelet/kubelet_pods.go convertToAPIContainerStatuses)."""
    async with running_engine(fast_config(taint_rule_version=rules, feature_gates=gates)) as engine:
        await _started(engine, "p")
        assert ("allocatedResourcesStatus" in _container(engine, "p")) is reported
