"""The pod-status source against the simulator, through the real client."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client

from podmedic.domain.models import DeviceHealthEvent, Health
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.ingest_sources.conftest import Running, start_pod
from workers.ingest.sources import PodStatusSource


def _about(rid: str, health: Health | None = None) -> Callable[[object], bool]:
    return lambda o: (isinstance(o, DeviceHealthEvent) and o.device.resource_id == rid
                      and (health is None or o.health is health))


def test_transitions_become_events_and_healthy_devices_in_view_do_not(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, run_source: Callable[..., Running]
) -> None:
    pod = start_pod(sim, api)
    rid = pod["devices"][0]
    driver, pool, device = rid.split("/")
    running = run_source(PodStatusSource(kube, watch_timeout_s=2))
    running.ready()
    assert not running.matching(_about(rid)), "a healthy device coming into view is not news"

    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=79,
                          message="XID 79: GPU has fallen off the bus")
    [bad] = running.wait_for(_about(rid, Health.UNHEALTHY), what="the Unhealthy transition")
    assert isinstance(bad, DeviceHealthEvent)
    assert bad.code == 79 and bad.node == pod["node"] and bad.source == "pod-status"
    assert bad.message == "XID 79: GPU has fallen off the bus" and bad.reason == "allocatedResourcesStatus"
    assert bad.pod is not None and (bad.pod.name, bad.pod.uid) == (pod["name"], pod["uid"])

    sim.set_device_health(driver, pool, device, "Unknown", message="driver lost contact")
    [unknown] = running.wait_for(_about(rid, Health.UNKNOWN), what="the Unknown transition")
    sim.set_device_health(driver, pool, device, "Healthy")
    [good] = running.wait_for(_about(rid, Health.HEALTHY), what="the Healthy transition")
    assert len({bad.event_id, unknown.event_id, good.event_id}) == 3
    assert len(running.quiet(0.5)) == 3, "the kubelet's later status writes repeat nothing"


def test_a_flap_back_to_the_same_health_gets_a_new_id(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, run_source: Callable[..., Running]
) -> None:
    pod = start_pod(sim, api)
    rid = pod["devices"][0]
    driver, pool, device = rid.split("/")
    running = run_source(PodStatusSource(kube, watch_timeout_s=2))
    running.ready()
    for flap in (1, 2):
        sim.set_device_health(driver, pool, device, "Unhealthy", message="XID 94")
        running.wait_for(_about(rid, Health.UNHEALTHY), count=flap)
        sim.set_device_health(driver, pool, device, "Healthy")
        running.wait_for(_about(rid, Health.HEALTHY), count=flap)
    ids = [o.event_id for o in running.matching(_about(rid))]
    assert len(ids) == 4 and len(set(ids)) == 4
