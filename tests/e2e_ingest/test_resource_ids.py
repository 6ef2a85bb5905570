"""End to end: pod status names devices by the driver's CDI ID, and podmedic finds the device.

The shapes are the kubelet's (kubernetes/kubernetes pkg/kubelet/cm/dra/manager.go,
``UpdateAllocatedResourcesStatus``): a device's ``resourceID`` is the first CDI device ID the
driver returned from NodePrepareResources (dra-example-driver: ``k8s.<driver>/<class>=<claimUID>-
<device>``; one ID for every device of the claim for drivers such as ``nvidia.com/gpu=all``), and
``<driver>/<pool>/<device>`` only when it returned none. The simulator's kubelet writes them so
(``podmedic_sim.config.DriverPlugin``); the dev server, the real worker and the ingest's sources
(``run_sources``, as ``podmedic ingest`` runs them) do the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from temporalio.client import Client

from podmedic.kube import podview
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster, SimConfig, SimTimings
from podmedic_sim.config import DriverPlugin
from tests.e2e_ingest.conftest import SourceSet
from tests.e2e_ingest.test_cluster_sources import incident, runs
from tests.helpers import E2E_TIMINGS, assert_eventually, wait_until
from tests.simkit import gpu_pod, gpu_template
from workers.ingest.sources import PodStatusSource
from workflows.pod_reports.unresolved_device import UnresolvedDeviceWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGIN = {"per-device": DriverPlugin(cdi_ids="per-device"),
          "shared": DriverPlugin(cdi_ids="shared", cdi_kind="nvidia.com/gpu")}


@pytest.fixture(scope="module", params=sorted(PLUGIN))
def ingest_sim(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A cluster whose gpu.nvidia.com plugin names devices per device, or all by one shared CDI ID."""
    config = SimConfig(nodes=2, devices_per_node=4, timings=SimTimings(**E2E_TIMINGS),
                       plugins={"gpu.nvidia.com": PLUGIN[request.param]})
    cluster = SimCluster(config)
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp(f"cdi-{request.param}") / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


def _two_gpu_pod(sim: SimCluster) -> dict[str, Any]:
    """A running pod whose one claim holds two devices; its ``sim.state()`` entry."""
    api = k8s_config.new_client_from_config(str(sim.kubeconfig_path))  # type: ignore[no-untyped-call]
    name = f"cdi-{uuid.uuid4().hex[:6]}"
    try:
        k8s.ResourceV1Api(api).create_namespaced_resource_claim_template(  # type: ignore[arg-type]
            "default", gpu_template(f"{name}-gpu", count=2))
        k8s.CoreV1Api(api).create_namespaced_pod("default", gpu_pod(name, template=f"{name}-gpu"))  # type: ignore[arg-type]
    finally:
        api.close()

    def running() -> dict[str, Any] | None:
        found = [p for p in sim.state()["pods"] if p["name"] == name and p["ready"] and len(p["devices"]) == 2]
        return found[0] if found else None

    return wait_until(running, timeout=20, what=f"pod {name} with two devices")


async def test_a_cdi_named_device_opens_its_own_incident_or_a_report_on_the_pod(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet],
) -> None:
    client, task_queue = ingest_worker
    sources = source_sets()
    await sources.watching()
    pod = _two_gpu_pod(ingest_sim)
    failing, other = (tuple(d.split("/")) for d in pod["devices"])
    kube = KubeGateway(Path(str(ingest_sim.kubeconfig_path)))
    try:
        reported = podview.device_statuses(kube.get_pod("default", pod["name"]) or {})
    finally:
        kube.close()
    assert all("=" in rid for rid in reported), reported  # CDI IDs, not <driver>/<pool>/<device>
    ingest_sim.set_device_health(*failing, "Unhealthy", reason="XidError", code=79, message="XID 79")
    try:
        if ingest_sim.config.plugins["gpu.nvidia.com"].cdi_ids == "per-device":
            state = await incident(client, task_queue, failing)
            assert state.node == failing[1]
            assert await runs(client, task_queue, f"device/{'/'.join(other)}") == 0  # the right device only
        else:
            # One CDI ID for both devices: podmedic cannot tell which failed. It does not guess; it
            # reports on the pod (and never taints), and the pod-status source counts it.
            async def reported_on_pod() -> Any:
                async for wf in client.list_workflows(f"WorkflowType = 'UnresolvedDeviceIncident' AND "
                                                      f"TaskQueue = '{task_queue}'"):
                    if pod["name"] in wf.id:
                        handle = client.get_workflow_handle_for(UnresolvedDeviceWorkflow.run, wf.id)
                        return await handle.result()
                raise AssertionError("no report yet")

            outcome = await assert_eventually(reported_on_pod, timeout=30)
            assert outcome.reported_on_pod and "nvidia.com/gpu=all" in outcome.explanation
            status_source = sources.source("pod-status")
            assert isinstance(status_source, PodStatusSource) and status_source.unresolved >= 1
            for device in (failing, other):
                assert await runs(client, task_queue, f"device/{'/'.join(device)}") == 0
            api = k8s_config.new_client_from_config(str(ingest_sim.kubeconfig_path))  # type: ignore[no-untyped-call]
            try:
                events = k8s.CoreV1Api(api).list_namespaced_event(
                    "default", field_selector=f"reason=PodmedicDeviceUnresolved,involvedObject.name={pod['name']}")
            finally:
                api.close()
            assert len(events.items) == 1
    finally:
        ingest_sim.set_device_health(*failing, "Healthy")

