"""End to end: a pod podmedic put back on its node moves off once that node turns out bad.

A device fails under a training pod; the ``same_node`` rung puts the replacement on another GPU of
the same node (nothing else on the node had failed then). Seconds later two more GPUs of that node
fail (idle ones, seen only by the node agent's NVML view): three devices within the correlation
window make a node incident, which cordons the node. The first incident then asks the replacement
to save a checkpoint and moves it off with its ``any_node`` rung; the Job's next pod runs elsewhere.
The Temporal dev server, the simulator over HTTP, the real worker, the ingest and the node agent.
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

from podmedic.domain.incident import IncidentState
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.helpers import assert_eventually, served_sim, sim_node, wait_until
from tests.pipeline import running_pipeline
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

LADDER = "[{action: same_node, timeout_s: 20}, {action: any_node, timeout_s: 20}]"
POLICY = parse_policy(f"""
drivers:
  default:
    detection: {{node_correlation: {{devices: 3, window_s: 120}}}}
    checkpoint: {{timeout_s: 5, poll_s: 0.2}}
    recovery: {{transient: {LADDER}, permanent: {LADDER}, verify_poll_s: 0.2}}
    close: {{heal_wait_s: 120, anti_flap_s: 1, poll_s: 0.3}}
    ticket: {{backend: none}}
    node_quarantine: {{enabled: true, hold_s: 120, poll_s: 0.5}}
""")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("e2e-move-off"), image_pull_s=0.2) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async with running_pipeline(dev_env.client, sim, POLICY, task_queue):
        yield dev_env.client


def _running_pod(sim: SimCluster, job: str) -> dict[str, Any] | None:
    pods = [p for p in sim.state()["pods"] if p.get("job") == job and p.get("ready")]
    return pods[0] if len(pods) == 1 else None


def _line(notes: list[str], text: str) -> int:
    found = [i for i, m in enumerate(notes) if text in m]
    assert found, f"no timeline line with {text!r}:\n" + "\n".join(notes)
    return found[0]


async def _state(client: Client, device: str) -> IncidentState:
    try:
        return await client.get_workflow_handle(f"device/{device}").query(DeviceIncidentWorkflow.get_state)
    except RPCError as err:
        raise AssertionError(f"no incident yet: {err}") from err


async def test_a_pod_placed_back_on_a_node_that_turns_bad_moves_off_checkpoint_first(sim: SimCluster,
                                                                                   stack: Client) -> None:
    client = stack
    job = f"train-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(job, image=f"registry.local/{job}:1"))
    first = await asyncio.to_thread(wait_until, lambda: _running_pod(sim, job), timeout=30, what="a Ready pod")
    node = first["node"]
    driver, pool, name = first["devices"][0].split("/")
    sim.set_device_health(driver, pool, name, "Unhealthy", reason="XidError", code=94, message="XID 94")
    device = first["devices"][0]

    async def placed_back() -> dict[str, Any]:
        state = await _state(client, device)
        assert any(r.action == "same_node" and r.verified for r in state.recovery), state.doing
        pod = _running_pod(sim, job)
        assert pod is not None and pod["name"] != first["name"] and pod["node"] == node, pod
        return pod
    replacement = await assert_eventually(placed_back, timeout=60)

    busy = set(replacement["devices"]) | {device}
    idle = [rid for d in sim.state()["devices"] if d["node"] == node and d["driver"] == driver
            and (rid := f"{d['driver']}/{d['pool']}/{d['device']}") not in busy and not d["allocated_to"]][:2]
    assert len(idle) == 2, sim.state()["devices"]
    for other in idle:  # seen by the node agent only: no pod holds them
        sim.set_device_health(*other.split("/"), "Unhealthy", reason="XidError", code=79, message="XID 79")

    async def moved() -> tuple[IncidentState, dict[str, Any]]:
        state = await _state(client, device)
        assert [r.action for r in state.recovery] == ["same_node", "any_node"], state.doing
        pod = _running_pod(sim, job)
        assert pod is not None and pod["node"] != node, (pod, state.doing)
        return state, pod
    state, final = await assert_eventually(moved, timeout=90)
    assert (sim_node(sim, node).get("spec") or {}).get("unschedulable"), "the node incident cordoned the node"
    assert state.node_incident == f"node/{node}"
    notes = [t.message for t in state.timeline]
    asked = _line(notes, "checkpoint, then move off the node")
    saved = _line(notes, f"before moving off: {replacement['name']} (annotation): saved")
    evicted = _line(notes, f"any_node default/{replacement['name']}")
    assert asked < saved < evicted, notes
    assert [(r.action, r.verified) for r in state.recovery] == [("same_node", True), ("any_node", True)]
    assert state.recovery[-1].pod is not None and state.recovery[-1].pod.node == final["node"]
