"""Unknown in pod status is news only as a change: a driver without the health service has every
device Unknown from the start.

Upstream: pkg/kubelet/cm/dra/healthinfo.go ``getHealthInfo`` answers Unknown for a device its
driver never reported (or last reported longer ago than its health timeout), and
``UpdateAllocatedResourcesStatus`` (manager.go) lists every device of the container's claims.
Until podmedic knew this, every GPU of a driver without the health service (NVIDIA's DRA driver
serves it only with its NVMLDeviceHealthCheck gate) would have become an incident.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import config

from podmedic.domain.models import DeviceHealthEvent, Health
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from podmedic_sim.config import DriverPlugin
from tests.ingest_sources.conftest import Running, start_pod
from tests.simkit import fast_config
from workers.ingest.sources import PodStatusSource

SILENT = DriverPlugin(cdi_ids="per-device", health_service=False)
REPORTING = DriverPlugin(cdi_ids="per-device", health_service=True)


@pytest.fixture
def silent_sim(tmp_path: Path) -> Iterator[SimCluster]:
    cluster = SimCluster(fast_config(nodes=1, devices_per_node=2, plugins={"gpu.nvidia.com": SILENT}),
                         bookmark_interval_s=0.1)
    cluster.start(kubeconfig_path=tmp_path / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


def _plugin(sim: SimCluster, plugin: DriverPlugin) -> None:
    sim.call(lambda: sim.engine.config.plugins.__setitem__("gpu.nvidia.com", plugin))


def test_unknown_from_the_start_is_not_news_but_a_change_to_it_is(
    silent_sim: SimCluster, run_source: Callable[..., Running]
) -> None:
    kube = KubeGateway(Path(str(silent_sim.kubeconfig_path)))
    api = config.new_client_from_config(str(silent_sim.kubeconfig_path))
    try:
        pod = start_pod(silent_sim, api)
        rid = pod["devices"][0]
        running = run_source(PodStatusSource(kube, watch_timeout_s=2))
        running.ready()
        assert running.quiet(0.5) == [], "every device Unknown from the start: no incident for any"

        _plugin(silent_sim, REPORTING)  # the driver starts serving health, and the device fails
        silent_sim.set_device_health(*rid.split("/"), "Unhealthy", reason="XidError")
        [bad] = running.wait_for(lambda o: isinstance(o, DeviceHealthEvent) and o.health is Health.UNHEALTHY,
                                 what="Unhealthy, a change from Unknown")
        assert isinstance(bad, DeviceHealthEvent) and bad.device.resource_id == rid

        silent_sim.set_device_health(*rid.split("/"), "Healthy")
        running.wait_for(lambda o: isinstance(o, DeviceHealthEvent) and o.health is Health.HEALTHY)
        # The driver's plugin exits: the kubelet clears its cache and the device is Unknown. A change
        # from Healthy, so it is news (an incident that waits the Unknown grace).
        silent_sim.call(lambda: silent_sim.engine.set_health_stream("gpu.nvidia.com", pod["node"], "ended"))
        running.wait_for(lambda o: isinstance(o, DeviceHealthEvent) and o.health is Health.UNKNOWN,
                         what="Unknown, a change from Healthy")
    finally:
        kube.close()
        api.close()
