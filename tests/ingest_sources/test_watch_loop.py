"""The watch loop: resume from the persisted cursor, relist on 410, never skip what was not delivered."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from podmedic.domain.models import DeviceHealthEvent, Health
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.helpers import wait_until
from tests.ingest_sources.conftest import Running, free_devices, start_pod
from tests.simkit import fast_config
from workers.ingest.sources import PodStatusSource, SliceTaintSource


def _about(rid: str, health: Health | None = None) -> Callable[[object], bool]:
    return lambda o: (isinstance(o, DeviceHealthEvent) and o.device.resource_id == rid
                      and (health is None or o.health is health))


def _key(rid: str) -> tuple[str, str, str]:
    driver, pool, device = rid.split("/")
    return driver, pool, device


def _cursor(state_dir: Path, name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((state_dir / f"watch-{name}.json").read_text())
    return data


def test_restart_resumes_from_the_cursor_and_loses_nothing(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, run_source: Callable[..., Running], tmp_path: Path
) -> None:
    pod = start_pod(sim, api, count=2)
    (rid_a, rid_b) = pod["devices"]
    first = run_source(PodStatusSource(kube, state_dir=tmp_path, watch_timeout_s=2, cursor_interval_s=0))
    first.ready()
    sim.set_device_health(*_key(rid_a), "Unhealthy", message="XID 79")
    first.wait_for(_about(rid_a, Health.UNHEALTHY))
    first.close()
    saved = _cursor(tmp_path, "pod-status")
    assert saved["resourceVersion"] and rid_a in json.dumps(saved["memory"])

    # While the ingest is down: a second device fails, the first heals.
    sim.set_device_health(*_key(rid_b), "Unhealthy", message="XID 48")
    sim.set_device_health(*_key(rid_a), "Healthy")
    wait_until(lambda: all(d["health"] != "Unhealthy" or d["device"] == rid_b.split("/")[2]
                           for d in sim.state()["devices"] if d["pool"] == pod["node"]), what="health applied")

    second = run_source(PodStatusSource(kube, state_dir=tmp_path, watch_timeout_s=2, cursor_interval_s=0))
    [b] = second.wait_for(_about(rid_b, Health.UNHEALTHY), what="the failure that happened while down")
    second.wait_for(_about(rid_a, Health.HEALTHY), what="the heal that happened while down")
    assert second.source.stats.resumed_from == saved["resourceVersion"]
    assert second.source.stats.lists == 0, "resumed, not relisted"
    assert not second.matching(_about(rid_a, Health.UNHEALTHY)), "what was delivered is not delivered again"
    assert isinstance(b, DeviceHealthEvent) and b.message == "XID 48"


def test_an_undelivered_object_is_replayed_after_a_restart(
    sim: SimCluster, kube: KubeGateway, run_source: Callable[..., Running], tmp_path: Path
) -> None:
    (driver, pool, dev_a), (_, _, dev_b) = free_devices(sim)[:2]
    rid_a, rid_b = f"{driver}/{pool}/{dev_a}", f"{driver}/{pool}/{dev_b}"
    try:
        first = run_source(SliceTaintSource(kube, state_dir=tmp_path, watch_timeout_s=2, cursor_interval_s=0),
                           fail=_about(rid_b))
        first.ready()
        sim.set_slice_taint(driver, pool, dev_a, "gpu.nvidia.com/xid", "79", "None")
        first.wait_for(_about(rid_a))
        # emit returned; the cursor moves right after (the test thread may look first).
        wait_until(lambda: (tmp_path / "watch-slice-taints.json").exists()
                   and rid_a in json.dumps(_cursor(tmp_path, "slice-taints")["memory"]), what="the cursor past A")
        version_a = int(str(_cursor(tmp_path, "slice-taints")["resourceVersion"]))
        sim.set_slice_taint(driver, pool, dev_b, "gpu.nvidia.com/xid", "48", "None")
        wait_until(lambda: first.source.stats.errors > 0, what="the failed delivery")
        first.close()
        saved = _cursor(tmp_path, "slice-taints")
        slice_b = next(s for s in kube.list_objects("resourceslices", field_selector=f"spec.driver={driver}")[0]
                       if s["spec"]["pool"]["name"] == pool)
        assert version_a <= int(str(saved["resourceVersion"])) < int(slice_b["metadata"]["resourceVersion"]), \
            "the cursor never passes an object whose observations were not delivered"
        assert rid_b not in json.dumps(saved["memory"])

        second = run_source(SliceTaintSource(kube, state_dir=tmp_path, watch_timeout_s=2, cursor_interval_s=0))
        [b] = second.wait_for(_about(rid_b), what="the replayed taint")
        assert isinstance(b, DeviceHealthEvent) and b.code == 48
        assert second.source.stats.lists == 0 and not second.matching(_about(rid_a))
    finally:
        for dev in (dev_a, dev_b):
            sim.set_slice_taint(driver, pool, dev, "gpu.nvidia.com/xid", remove=True)


def test_api_errors_back_off_and_recover(
    sim: SimCluster, kube: KubeGateway, run_source: Callable[..., Running]
) -> None:
    driver, pool, device = free_devices(sim)[0]
    # Four 500s: the gateway tries a list three times within one call (KubeGateway._read), so the
    # first list fails as a whole and the source backs off; the next list meets the fourth and goes on.
    sim.add_api_fault(verbs=["list", "watch"], resources=["resourceslices"], status=500, count=4)
    try:
        running = run_source(SliceTaintSource(kube, watch_timeout_s=2, backoff_s=(0.05, 0.2)))
        sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/gpu-lost", "", "NoSchedule")
        running.wait_for(_about(f"{driver}/{pool}/{device}"), what="the taint despite the errors")
        assert running.source.stats.errors >= 1
    finally:
        sim.clear_api_faults()
        sim.set_slice_taint(driver, pool, device, "gpu.nvidia.com/gpu-lost", remove=True)


@pytest.fixture
def small_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, KubeGateway]]:
    """A simulator whose watch history holds 50 changes, so old cursors expire (410)."""
    cluster = SimCluster(fast_config(nodes=1, devices_per_node=4), history_size=50, bookmark_interval_s=0.1)
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("gone") / "kubeconfig")
    kube = KubeGateway(Path(str(cluster.kubeconfig_path)))
    yield cluster, kube
    kube.close()
    cluster.stop()


def test_an_expired_cursor_relists_and_still_sees_every_change(
    small_history: tuple[SimCluster, KubeGateway], run_source: Callable[..., Running], tmp_path: Path
) -> None:
    sim, kube = small_history
    driver, pool = "gpu.nvidia.com", "node-0000"
    sim.set_slice_taint(driver, pool, "gpu-0", "gpu.nvidia.com/xid", "79", "NoSchedule")
    first = run_source(SliceTaintSource(kube, state_dir=tmp_path, watch_timeout_s=2, cursor_interval_s=0))
    first.wait_for(_about(f"{driver}/{pool}/gpu-0", Health.UNHEALTHY))
    first.close()

    # While down: gpu-0 heals, gpu-1 fails, and 60 other changes push the cursor out of history.
    sim.set_slice_taint(driver, pool, "gpu-0", "gpu.nvidia.com/xid", remove=True)
    sim.set_slice_taint(driver, pool, "gpu-1", "gpu.nvidia.com/xid", "48", "None")
    for i in range(30):
        sim.set_slice_taint(driver, pool, "gpu-3", "podmedic.io/noise", str(i), "None")
        sim.set_slice_taint(driver, pool, "gpu-3", "podmedic.io/noise", remove=True)

    second = run_source(SliceTaintSource(kube, state_dir=tmp_path, watch_timeout_s=2, cursor_interval_s=0))
    second.wait_for(_about(f"{driver}/{pool}/gpu-1", Health.UNHEALTHY), what="the failure while down")
    second.wait_for(_about(f"{driver}/{pool}/gpu-0", Health.HEALTHY), what="the heal while down")
    stats = second.source.stats
    assert stats.resumed_from is not None and stats.gone == 1 and stats.lists == 1
    assert not second.matching(_about(f"{driver}/{pool}/gpu-3"))


def test_a_delivered_observation_is_saved_at_once_whatever_the_throttle(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, run_source: Callable[..., Running], tmp_path: Path
) -> None:
    # A SIGKILLed ingest replays from its saved cursor: a position left unsaved by the throttle would
    # replay this failure after its incident closed and open a second incident for a repaired device.
    pod = start_pod(sim, api)
    [rid] = pod["devices"]
    running = run_source(PodStatusSource(kube, state_dir=tmp_path, watch_timeout_s=2, cursor_interval_s=3600))
    running.ready()
    sim.set_device_health(*_key(rid), "Unhealthy", message="XID 79")
    running.wait_for(_about(rid, Health.UNHEALTHY))
    wait_until(lambda: rid in json.dumps(_cursor(tmp_path, "pod-status")["memory"]),
               what="the cursor saved with the delivered failure, before any flush at stop")
