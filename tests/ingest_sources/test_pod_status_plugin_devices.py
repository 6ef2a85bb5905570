"""Device-plugin devices in pod status become ``PluginDevice`` observations for their node.

Upstream, kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go ``UpdateAllocatedResourcesStatus``:
an extended resource's entry is named after the resource (``nvidia.com/gpu``, no ``claim:`` prefix),
each element's resourceID is the plugin's device ID, and its health is ``Healthy`` or ``Unhealthy``.
Before podmedic knew this, such an entry was an "unresolved" DRA device reported on the pod only.
The pod is created through the unmodified ``kubernetes`` client, as a user would create it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from podmedic.domain.models import Health, PluginDevice
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.helpers import wait_until
from tests.ingest_sources.conftest import Running
from tests.simkit import fast_config
from workers.ingest.sources import PodStatusSource

GPU = "nvidia.com/gpu"


@pytest.fixture
def plugin_sim(tmp_path: Path) -> Iterator[SimCluster]:
    cluster = SimCluster(fast_config(nodes=1, device_plugins={GPU: 2}), bookmark_interval_s=0.1)
    cluster.start(kubeconfig_path=tmp_path / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


def _device(sim: SimCluster, name: str) -> str | None:
    pod = sim.call(lambda: sim.store.find("pods", "default", name)) or {}
    entries = [e for c in (pod.get("status") or {}).get("containerStatuses") or []
               for e in c.get("allocatedResourcesStatus") or []]
    return str(entries[0]["resources"][0]["resourceID"]) if entries else None


def test_an_unhealthy_plugin_device_is_reported_for_its_node_and_healthy_again_after(
    plugin_sim: SimCluster, run_source: Callable[..., Running]
) -> None:
    kube = KubeGateway(Path(str(plugin_sim.kubeconfig_path)))
    api = config.new_client_from_config(str(plugin_sim.kubeconfig_path))
    try:
        client.CoreV1Api(api).create_namespaced_pod("default", client.V1Pod(
            metadata=client.V1ObjectMeta(name="trainer"),
            spec=client.V1PodSpec(containers=[client.V1Container(
                name="main", image="registry.local/trainer:1",
                resources=client.V1ResourceRequirements(limits={GPU: "1"}))])))
        device = wait_until(lambda: _device(plugin_sim, "trainer"), timeout=10, what="the pod's GPU in its status")
        running = run_source(PodStatusSource(kube, watch_timeout_s=2))
        running.ready()
        assert running.quiet(0.3) == [], "a healthy device coming into view is not news"

        plugin_sim.call(lambda: plugin_sim.engine.set_plugin_device_health("node-0000", GPU, device, "Unhealthy"))
        [bad] = running.wait_for(lambda o: isinstance(o, PluginDevice) and o.health is Health.UNHEALTHY)
        assert isinstance(bad, PluginDevice)
        assert (bad.node, bad.resource, bad.device_id, bad.pod.name) == ("node-0000", GPU, device, "trainer")
        assert bad.workflow_id == "node/node-0000"

        plugin_sim.call(lambda: plugin_sim.engine.set_plugin_device_health("node-0000", GPU, device, "Healthy"))
        running.wait_for(lambda o: isinstance(o, PluginDevice) and o.health is Health.HEALTHY)
        assert len(running.quiet(0.3)) == 2, "nothing else: no unresolved report, no DRA event"
    finally:
        kube.close()
        api.close()
