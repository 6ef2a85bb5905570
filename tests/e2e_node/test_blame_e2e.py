"""End to end: a fault the workload caused is not blamed on the node or the device.

XIDs 13, 31 and 43 are the application's own errors: NVIDIA's DRA driver ignores them (its XID
ignore list) and NVIDIA's XID catalog resolves them by restarting the application
(docs.nvidia.com/deploy/xid-errors, "Analyzing Xid Errors with the Xid Catalog": XID 13,
RESTART_APP). Three of them on one node within the correlation window are no sign of a bad node,
and the same device hitting one twice is no lemon. The Temporal dev server, the simulator over HTTP,
the real worker, the ingest and the node agent (which reports the XIDs, as NVML would).
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

from podmedic.domain.models import Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.helpers import served_sim, sim_node, wait_until
from tests.incidents import last_run, next_outcome
from tests.pipeline import running_pipeline

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    detection: {node_correlation: {devices: 3, window_s: 120}}
    checkpoint: {timeout_s: 3, poll_s: 0.2}
    recovery:
      transient: [{action: in_place_restart, timeout_s: 10}, {action: same_node, timeout_s: 20}]
      permanent: [{action: same_node, timeout_s: 20}]
      verify_poll_s: 0.2
    close: {heal_wait_s: 10, anti_flap_s: 1, poll_s: 0.3}
    ticket: {backend: none}
    node_quarantine: {enabled: true, hold_s: 60, poll_s: 0.5}
    repeat_offenders: {incidents: 2, window_s: 3600}
  gpu.nvidia.com:
    detection: {corroborate_s: 10}
    classification: {codes: {permanent: [79], container_code: [13, 31, 43]}}
""")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("e2e-blame"), image_pull_s=0.2) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async with running_pipeline(dev_env.client, sim, POLICY, task_queue):
        yield dev_env.client


def _ready_pods(sim: SimCluster, names: list[str]) -> list[dict[str, Any]] | None:
    pods = [p for p in sim.state()["pods"] if p.get("job") in names and p.get("ready")]
    return pods if len(pods) == len(names) else None


def _fail(sim: SimCluster, pod: dict[str, Any], code: int) -> str:
    driver, pool, device = pod["devices"][0].split("/")
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=code,
                          clears_on_restart=True, message=f"XID {code}")
    return f"{driver}/{pool}/{device}"


def _notes(outcome: Any) -> str:
    return "\n".join(t.message for t in outcome.timeline)


async def test_workload_faults_on_three_devices_of_a_node_leave_the_node_alone(sim: SimCluster,
                                                                               stack: Client) -> None:
    client = stack
    names = [f"train-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for name in names:
        sim.call(lambda n=name: sim.engine.create_training_job(n, image="registry.local/shared:1"))
    pods = await asyncio.to_thread(wait_until, lambda: _ready_pods(sim, names), timeout=30, what="three Ready pods")
    nodes = {p["node"] for p in pods}
    assert len(nodes) == 1, nodes  # packed on one node: three failing devices would make a node incident
    node = nodes.pop()
    previous = {p["name"]: await last_run(client, p["devices"][0]) for p in pods}
    failed = [(_fail(sim, pod, code), pod["name"]) for pod, code in zip(pods, (13, 31, 43), strict=True)]
    outcomes = await asyncio.gather(*(next_outcome(client, rid, previous[name]) for rid, name in failed))
    spec = sim_node(sim, node).get("spec") or {}
    assert not spec.get("unschedulable") and not spec.get("taints"), spec
    with pytest.raises(RPCError):  # no node watch was ever told: none exists
        await client.get_workflow_handle(f"node/{node}").describe()
    for outcome in outcomes:
        assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, outcome.explanation
        assert f"not reported to node {node}'s watch: the workload caused this fault" in _notes(outcome)


async def test_a_device_hitting_its_workloads_fault_twice_is_no_repeat_offender(sim: SimCluster,
                                                                              stack: Client) -> None:
    client = stack
    name = f"train-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(name, image=f"registry.local/{name}:1"))
    outcomes = []
    for attempt in range(2):  # the policy makes a device with 2 incidents in an hour a repeat offender
        pod = (await asyncio.to_thread(wait_until, lambda: _ready_pods(sim, [name]), timeout=30,
                                       what="a Ready pod"))[0]
        previous = await last_run(client, pod["devices"][0])
        outcome = await next_outcome(client, _fail(sim, pod, 31), previous)
        assert outcome.permanence == "transient", (attempt, _notes(outcome))
        assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, (attempt, outcome.explanation)
        outcomes.append(outcome)
    for outcome in outcomes:
        assert "repeat-offender check skipped: the workload caused this fault" in _notes(outcome)
