"""End to end: three devices of one node fail → the node is cordoned and tainted; healed → lifted.

The Temporal dev server, the simulator over HTTP, the real worker and ingest.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.node import NodeIncidentOutcome
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.e2e_node.stack import ingest_and_worker
from tests.helpers import served_sim, sim_node, wait_until
from workflows.node.incident import NodeIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    checkpoint: {timeout_s: 3, poll_s: 0.2}
    recovery:
      transient: [{action: same_node, timeout_s: 5}]
      verify_poll_s: 0.2
    close: {heal_wait_s: 30, anti_flap_s: 1, poll_s: 0.5}
    ticket: {backend: none}
    node_quarantine: {hold_s: 60, poll_s: 0.5}
""")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("e2e-node"), image_pull_s=0.2) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async with ingest_and_worker(dev_env.client, sim, task_queue, POLICY):
        yield dev_env.client


async def test_three_devices_failing_quarantine_the_node_until_they_heal(sim: SimCluster, stack: Client) -> None:
    client = stack
    names = [f"train-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for name in names:
        sim.call(lambda n=name: sim.engine.create_training_job(n, image="registry.local/shared:1"))

    def ready() -> list[dict[str, Any]] | None:
        pods = [p for p in sim.state()["pods"] if p.get("job") in names and p.get("ready")]
        return pods if len(pods) == 3 else None

    pods = await asyncio.to_thread(wait_until, ready, timeout=30, what="three Ready pods")
    nodes = {p["node"] for p in pods}
    assert len(nodes) == 1, nodes  # the scheduler packs them on the lowest node
    node = nodes.pop()
    devices = [p["devices"][0].split("/") for p in pods]
    for driver, pool, device in devices:
        sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", message="XID 94: contained ECC")

    def quarantined() -> bool:
        spec = sim_node(sim, node).get("spec") or {}
        return bool(spec.get("unschedulable")) and any(t.get("key") == "podmedic.io/node-quarantine"
                                                       for t in spec.get("taints") or [])

    await asyncio.to_thread(wait_until, quarantined, timeout=30, what=f"{node} cordoned and tainted")
    notes = sim_node(sim, node)["metadata"]["annotations"]
    assert notes["podmedic.io/incident"] == f"node/{node}" and "podmedic" in notes["podmedic.io/changed-by"]
    for driver, pool, device in devices:
        sim.set_device_health(driver, pool, device, "Healthy")
    watch = client.get_workflow_handle_for(NodeIncidentWorkflow.run, f"node/{node}")
    try:
        result: NodeIncidentOutcome = await asyncio.wait_for(watch.result(), timeout=60)
    except RPCError as err:
        raise AssertionError(f"node watch: {err}") from err
    assert result.escalated and not result.quarantined, result.explanation
    spec = sim_node(sim, node).get("spec") or {}
    assert not spec.get("unschedulable") and not spec.get("taints"), spec
    assert not [r for r in sim.state()["taint_rules"] if node in str(r)]  # no device rule left behind
