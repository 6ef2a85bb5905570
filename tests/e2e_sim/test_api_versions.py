"""DeviceTaintRule in the version the cluster serves, and what podmedic does when none is served.

Upstream: DeviceTaintRule is ``resource.k8s.io/v1alpha3`` in Kubernetes 1.35, ``v1beta2`` in 1.36
(both behind the DRADeviceTaints gate) and ``v1`` from 1.37 (KEP-5055; the k8s.io/api
``resource/v1alpha3``, ``v1beta2`` and ``v1`` packages). A client finds what is served through
discovery: ``GET /apis/resource.k8s.io`` and ``GET /apis/resource.k8s.io/<version>``. The
simulator serves each (``SimConfig.taint_rule_version``); the pipeline runs on v1 in
``test_pipeline.py`` and on v1beta2 and "not served" here.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import AbortRequest, IncidentOutcome
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health
from podmedic.domain.policy_file import parse_policy
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.startup import say_taint_rules
from podmedic_sim import SimCluster
from tests.helpers import run_kubectl, served_sim, sim_node, wait_until
from workers.ingest.starts import deliver_event
from workers.worker.main import build_worker
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    close: {heal_wait_s: 1, anti_flap_s: 1, poll_s: 0.5}
    ticket: {backend: none}
    node_quarantine: {hold_s: 600, poll_s: 1}
  gpu.nvidia.com:
    classification: {codes: {permanent: [79]}}
""")


@pytest.fixture(scope="module", params=["v1beta2", "none"])
def sim(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("apiv"), taint_rule_version=request.param) as cluster:
        yield cluster


def _event(device: DeviceRef) -> DeviceHealthEvent:
    return DeviceHealthEvent(device=device, health=Health.UNHEALTHY, node=device.pool, reason="xid", code=79,
                             message="XID 79", source="test", observed_at=dt.datetime.now(dt.UTC),
                             event_id=uuid.uuid4().hex)


def _fenced(sim: SimCluster) -> object:
    """What fences the device: its DeviceTaintRules (as served), or node-0000 cordoned and tainted."""
    if sim.config.taint_rule_version == "none":
        node = sim_node(sim, "node-0000")
        return node if node.get("spec", {}).get("unschedulable") else None
    return sim.call(lambda: sim.engine.store.list("devicetaintrules")) or None


async def _incident(env: WorkflowEnvironment, sim: SimCluster, task_queue: str,
                    device: DeviceRef) -> tuple[IncidentOutcome, object]:
    """Open the incident, wait until the device is fenced, abort it; the outcome and the fence seen."""
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    try:
        async with build_worker(env.client, task_queue, kube):
            await deliver_event(env.client, _event(device), POLICY, task_queue=task_queue)
            handle = env.client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id)
            try:
                fence = await asyncio.to_thread(wait_until, lambda: _fenced(sim), timeout=60, what="the device fenced")
            except AssertionError as exc:
                state = await handle.query(DeviceIncidentWorkflow.get_state)
                raise AssertionError("\n".join([str(exc), *(t.message for t in state.timeline)])) from None
            with contextlib.suppress(RPCError):  # an incident that closed by itself needs no abort
                await handle.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="test", reason="fence seen"))
            outcome = await asyncio.wait_for(handle.result(), timeout=60)
    finally:
        kube.close()
    return outcome, fence


async def test_discovery_finds_the_served_version(sim: SimCluster) -> None:
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    try:
        found = await asyncio.to_thread(kube.taint_rule_api)
    finally:
        kube.close()
    if sim.config.taint_rule_version == "none":
        assert found.version is None and "DRADeviceTaints" in found.describe()
        assert found.group_versions == ("v1",)
    else:
        assert found.version == sim.config.taint_rule_version
        assert found.describe() == f"DeviceTaintRule: resource.k8s.io/{found.version}"


async def test_an_incident_taints_in_the_served_version_or_quarantines_the_node(
    dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str
) -> None:
    # One Temporal server per module: each version's incident on a node of its own, so no node watch
    # of one run (on a task queue no worker polls any more) receives the other's reports.
    node = "node-0000" if sim.config.taint_rule_version == "none" else "node-0001"
    device = DeviceRef(driver="gpu.nvidia.com", pool=node, device="gpu-2")
    outcome, fence = await _incident(dev_env, sim, task_queue, device)
    text = "\n".join(t.message for t in outcome.timeline)
    if sim.config.taint_rule_version == "none":
        assert "no DeviceTaintRule: DeviceTaintRule is not served" in text, text
        assert "node quarantine instead of a device taint" in text, text
        assert isinstance(fence, dict) and any(t["key"].startswith("podmedic") for t in fence["spec"]["taints"])
    else:
        assert isinstance(fence, list) and outcome.taint_rule in {r["metadata"]["name"] for r in fence}, text
        assert {r["apiVersion"] for r in fence} == {f"resource.k8s.io/{sim.config.taint_rule_version}"}


async def test_the_worker_says_at_start_which_version_or_which_gate(
    sim: SimCluster, caplog: pytest.LogCaptureFixture
) -> None:
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    try:
        with caplog.at_level(logging.INFO, logger="podmedic.kube"):
            await say_taint_rules(kube)
    finally:
        kube.close()
    [line] = [r for r in caplog.records if r.name == "podmedic.kube"]
    if sim.config.taint_rule_version == "none":
        assert line.levelno == logging.WARNING and "turn on the DRADeviceTaints feature gate" in line.getMessage()
    else:
        assert line.levelno == logging.INFO and line.getMessage().endswith(f"/{sim.config.taint_rule_version}")


async def test_the_server_says_which_release_it_emulates(sim: SimCluster) -> None:
    """kubectl version reads /version (k8s.io/apimachinery pkg/version Info): 1.36 serves DeviceTaintRule as
    v1beta2; "not served" stands for a 1.37 cluster with the DRADeviceTaints gate off."""
    done = run_kubectl(str(sim.kubeconfig_path), "version", "-o", "json")
    assert done.returncode == 0, done.stderr
    server = json.loads(done.stdout)["serverVersion"]
    minor = {"v1beta2": "36", "none": "37"}[sim.config.taint_rule_version]
    assert server["minor"] == minor and server["gitVersion"].startswith(f"v1.{minor}.")
