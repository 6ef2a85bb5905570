"""The ResourceSlice device-taint source against the simulator, through the real client."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client

from podmedic.domain.models import DeviceHealthEvent, Health
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.ingest_sources.conftest import Running, free_devices
from workers.ingest.sources import SliceTaintSource


def _about(rid: str, health: Health | None = None) -> Callable[[object], bool]:
    return lambda o: (isinstance(o, DeviceHealthEvent) and o.device.resource_id == rid
                      and (health is None or o.health is health))


def test_new_taints_of_any_effect_are_unhealthy_and_all_gone_is_healthy(
    sim: SimCluster, kube: KubeGateway, run_source: Callable[..., Running]
) -> None:
    driver, pool, device = free_devices(sim)[0]
    rid = f"{driver}/{pool}/{device}"
    running = run_source(SliceTaintSource(kube, watch_timeout_s=2))
    running.ready()

    sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/xid", "79", "NoExecute")
    [xid] = running.wait_for(_about(rid, Health.UNHEALTHY), what="the xid taint")
    assert isinstance(xid, DeviceHealthEvent)
    assert (xid.reason, xid.code, xid.node, xid.source) == ("gpu.nvidia.com/xid", 79, pool, "slice-taint")
    assert "gpu.nvidia.com/xid=79" in xid.message and "NoExecute" in xid.message and f"{pool}-{driver}" in xid.message

    sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/gpu-lost", "", "None")
    lost = running.wait_for(_about(rid, Health.UNHEALTHY), count=2, what="the gpu-lost taint")[1]
    assert isinstance(lost, DeviceHealthEvent)
    assert (lost.reason, lost.code) == ("gpu.nvidia.com/gpu-lost", None) and "effect None" in lost.message

    sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/xid", remove=True)
    assert not running.matching(_about(rid, Health.HEALTHY)) and len(running.quiet(0.4)) == 2, \
        "a device keeping one taint is still unhealthy"
    sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/gpu-lost", remove=True)
    [healed] = running.wait_for(_about(rid, Health.HEALTHY), what="the device untainted")
    assert healed.reason == "slice-taint-removed" and "gpu-lost" in healed.message
    assert len({xid.event_id, lost.event_id, healed.event_id}) == 3


def test_podmedic_keys_and_devicetaintrules_are_not_reported(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, run_source: Callable[..., Running]
) -> None:
    driver, pool, device = free_devices(sim)[0]
    running = run_source(SliceTaintSource(kube, watch_timeout_s=2))
    running.ready()
    sim.set_slice_taint(driver, pool, device, "podmedic.io/unhealthy", "copied", "NoSchedule")
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "pm-test-rule"},
            "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device},
                     "taint": {"key": "podmedic.io/unhealthy", "value": "x", "effect": "NoSchedule"}}}
    client.ResourceV1Api(api).create_device_taint_rule(rule)
    try:
        assert running.quiet(0.6) == []
        # As in Kubernetes, a DeviceTaintRule never shows in the ResourceSlice it selects.
        slices, _ = kube.list_objects("resourceslices")
        taints = [t for s in slices if s["spec"]["pool"]["name"] == pool
                  for d in s["spec"]["devices"] if d["name"] == device for t in d.get("taints") or []]
        assert [t["value"] for t in taints] == ["copied"]
    finally:
        client.ResourceV1Api(api).delete_device_taint_rule("pm-test-rule")
        sim.set_slice_taint(driver, pool, device, "podmedic.io/unhealthy", remove=True)


def test_taints_present_at_start_are_reported_once_with_stable_ids(
    sim: SimCluster, kube: KubeGateway, run_source: Callable[..., Running]
) -> None:
    driver, pool, device = free_devices(sim)[0]
    rid = f"{driver}/{pool}/{device}"
    sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/xid", "48", "None")
    try:
        first = run_source(SliceTaintSource(kube, watch_timeout_s=2))
        [a] = first.wait_for(_about(rid), what="the taint found by the list")
        first.close()
        second = run_source(SliceTaintSource(kube, watch_timeout_s=2))
        [b] = second.wait_for(_about(rid), what="the taint found by a second list")
        assert isinstance(a, DeviceHealthEvent) and a.event_id == b.event_id and a.code == 48
        assert len(first.matching(_about(rid))) == 1
    finally:
        sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/xid", remove=True)
