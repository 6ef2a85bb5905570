"""A device plugin's device (``nvidia.com/gpu`` as an extended resource) failing: a node-scoped incident.

Upstream (kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go): the kubelet reports such a
device in ``allocatedResourcesStatus`` under an entry named after the resource, its resourceID the
plugin's device ID (KEP-4680's first half); node capacity counts every device and allocatable only the
healthy ones (``GetCapacity``). No DeviceTaintRule can select a device-plugin device (KEP-5055 selects
DRA devices by driver/pool/device), so podmedic makes the node the incident: the ingest (pod-status
source) opens ``node/<node>``, which quarantines the node, tells the pod, and lifts once the node's
allocatable counts every device again. Real Temporal (dev server), the simulator over HTTP, the real
worker and ingest.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.node import NodeIncidentState
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.helpers import served_sim, sim_node, wait_until
from tests.pipeline import running_pipeline
from workflows.node.incident import NodeIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
GPU = "nvidia.com/gpu"
QUARANTINE_KEY = "podmedic.io/node-quarantine"

POLICY = parse_policy("""
drivers:
  default:
    node_quarantine: {hold_s: 600, poll_s: 0.5}
""")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("plugin"), device_plugins={GPU: 2}) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async with running_pipeline(dev_env.client, sim, POLICY, task_queue):
        yield dev_env.client


def _gpu_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "registry.local/trainer:1",
                                     "resources": {"limits": {GPU: "1"}}}]}}


def _reported(sim: SimCluster, name: str) -> tuple[str, str] | None:
    """(node, device ID) the pod's status reports for its nvidia.com/gpu, once it does."""
    pod = sim.call(lambda: sim.store.find("pods", "default", name)) or {}
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for entry in status.get("allocatedResourcesStatus") or []:
            if entry["name"] == GPU:
                return pod["spec"]["nodeName"], entry["resources"][0]["resourceID"]
    return None


def _quarantined(node: dict[str, Any]) -> bool:
    return bool(node.get("spec", {}).get("unschedulable")) and any(
        t.get("key") == QUARANTINE_KEY for t in node.get("spec", {}).get("taints") or [])


async def test_a_failed_device_plugin_gpu_quarantines_its_node_tells_the_pod_and_lifts_once_healthy(
    sim: SimCluster, stack: Client
) -> None:
    sim.call(lambda: sim.store.create("pods", _gpu_pod("plugin-trainer")))
    node, device = await asyncio.to_thread(wait_until, lambda: _reported(sim, "plugin-trainer"), timeout=30,
                                           what="the pod's nvidia.com/gpu in its status")
    sim.call(lambda: sim.engine.set_plugin_device_health(node, GPU, device, "Unhealthy"))

    await asyncio.to_thread(wait_until, lambda: _quarantined(sim_node(sim, node)), timeout=60,
                            what=f"node {node} cordoned and tainted")
    handle = stack.get_workflow_handle_for(NodeIncidentWorkflow.run, f"node/{node}")
    state = await handle.query(NodeIncidentWorkflow.get_state, result_type=NodeIncidentState)
    assert state.escalated and state.plugin_devices == [f"{GPU}/{device}"] and state.devices == []
    events = await asyncio.to_thread(wait_until, lambda: [
        e for e in sim.call(lambda: sim.store.list("events", "default"))
        if e.get("reason") == "PodmedicPluginDeviceUnhealthy"
        and e.get("involvedObject", {}).get("name") == "plugin-trainer"], timeout=30, what="the pod's Event")
    assert device in events[0]["message"] and node in events[0]["message"]
    pod = sim.call(lambda: sim.store.get("pods", "default", "plugin-trainer"))
    assert pod["metadata"]["annotations"]["podmedic.io/problem"] == f"plugin_device: {GPU}/{device} Unhealthy"

    sim.call(lambda: sim.engine.set_plugin_device_health(node, GPU, device, "Healthy"))
    outcome = await asyncio.wait_for(handle.result(), timeout=60)
    assert not outcome.quarantined, outcome.explanation
    assert "allocatable counts every device-plugin device again" in outcome.explanation
    assert not _quarantined(sim_node(sim, node))
