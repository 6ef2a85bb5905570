"""Warm spares end to end: the fleet guard keeps a free node as a spare, and a failed rank whose own node
has no free healthy GPU moves there at once.

Real parts: the Temporal dev server, the real worker (its FleetGuard workflow and keep_spares activity,
speaking under deploy/'s RBAC), ``podmedic admission`` as its own process (it pins the replacement to the
spare with the spare's toleration, and takes that toleration off every other pod), and the simulator's
scheduler, which honours node taints and tolerations as kube-scheduler's TaintToleration plugin does
(podmedic_sim/affinity.py). The node's taints are read back with kubectl, the referee nobody here wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes import client
from temporalio.client import Client, WorkflowHandle

from podmedic.domain.fleet_guard.messages import GUARD_WORKFLOW_ID, GuardStatus
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.placement_holds import PINNED_BY, PINNED_NODE
from podmedic.domain.spares import SPARE_TAINT, SparesPolicy
from podmedic_sim import SimCluster
from podmedic_sim.topology import POOL_LABEL
from tests.e2e_recover.conftest import IMAGE, block_node, delete_job, fault, incident, notes, policy, ready_pod
from tests.e2e_recover.test_same_node_workloads import _create, _start_jobset, _template
from tests.helpers import clear_workloads, run_kubectl, wait_until
from workers.ingest.guard_sightings import GuardSightings
from workflows.fleet.guard import FleetGuardWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
NS = "default"
SAME = "[{action: same_node, timeout_s: 30}]"


@pytest.fixture(autouse=True)
def clean(sim: SimCluster) -> Iterator[None]:
    """Each test starts with every GPU free and healthy and no node a spare."""
    yield

    clear_workloads(sim)

    def no_spare() -> None:
        for node in sim.store.list("nodes"):
            if any(t.get("key") == SPARE_TAINT for t in node["spec"].get("taints") or []):
                node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t.get("key") != SPARE_TAINT]
                sim.store.replace("nodes", node, check_rv=False)

    sim.call(no_spare)
    wait_until(lambda: not sim.state()["pods"] or None, timeout=30, what="every pod gone")


def _keeping(per_pool: int) -> GuardPolicy:
    """A guard policy keeping ``per_pool`` spares per pool of the simulator's pool label, every second."""
    return GuardPolicy(spares=SparesPolicy(per_pool=per_pool, pool_label=POOL_LABEL, every_s=1))


@pytest_asyncio.fixture(loop_scope="session")
async def guard(worker: tuple[Client, str]) -> AsyncIterator[WorkflowHandle[FleetGuardWorkflow, None]]:
    """The fleet guard, started as the ingest starts it when the policy file keeps spares (before any
    incident asks); terminated at the end (its worker goes with the test)."""
    temporal, queue = worker
    told = await GuardSightings(temporal, queue).tell_policy(_keeping(1))
    assert "keeps 1 warm spare(s) per pool" in told, told
    handle = temporal.get_workflow_handle_for(FleetGuardWorkflow.run, GUARD_WORKFLOW_ID)
    yield handle
    with contextlib.suppress(Exception):
        await handle.terminate("test over")


def _taints(sim: SimCluster, node: str) -> list[dict[str, Any]]:
    """The node's taints as kubectl reads them."""
    assert sim.kubeconfig_path is not None
    done = run_kubectl(sim.kubeconfig_path, "get", "node", node, "-o", "json")
    assert done.returncode == 0, done.stderr
    taints: list[dict[str, Any]] = json.loads(done.stdout)["spec"].get("taints") or []
    return taints


def _spare(sim: SimCluster, node: str) -> bool | None:
    return any(t["key"] == SPARE_TAINT and t["effect"] == "NoSchedule" for t in _taints(sim, node)) or None


def _one_rank_on_a_full_node(sim: SimCluster) -> tuple[dict[str, Any], str]:
    """node-0001 full, its last GPU taken by a training Job's one rank; node-0000 free. The rank and the
    blocker of node-0001."""
    hold_off = block_node(sim, "node-0000", 3)
    blocker = block_node(sim, "node-0001", 2)
    name = f"train-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(name, image=IMAGE, prefer_node_label=False))
    rank = ready_pod(sim, lambda p: p.get("job") == name, f"a Ready pod of {name}")
    assert rank["node"] == "node-0001", rank
    delete_job(sim, hold_off)
    return rank, blocker


async def _status(handle: WorkflowHandle[FleetGuardWorkflow, None]) -> GuardStatus:
    return await handle.query(FleetGuardWorkflow.status)


async def test_a_rank_whose_node_is_full_moves_to_the_warm_spare(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str],
        guard: WorkflowHandle[FleetGuardWorkflow, None]) -> None:
    """The guard makes the free node a spare (kubectl sees the taint); a new Job that tolerates the spare
    taint loses that toleration at admission and stays off the spare; the failed rank's node has no free GPU,
    so the same_node rung pins its replacement to the spare, which then becomes an ordinary node."""
    temporal, queue = worker
    rank, _ = _one_rank_on_a_full_node(sim)
    await asyncio.to_thread(wait_until, lambda: _spare(sim, "node-0000"), timeout=30, what="node-0000 a spare")
    status = await _status(guard)
    assert status.spares is not None and [(p.pool, p.spares) for p in status.spares.pools] == \
        [("pool-000", ["node-0000"])], status.spares

    # A workload that asks for the spare by tolerating its taint does not get it.
    intruder = f"intruder-{uuid.uuid4().hex[:5]}"
    core = client.CoreV1Api(api)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": intruder},
            "spec": {"containers": [{"name": "c", "image": IMAGE}],
                     "tolerations": [{"key": SPARE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]}}
    made = core.api_client.sanitize_for_serialization(core.create_namespaced_pod(NS, body))
    assert not [t for t in made["spec"].get("tolerations") or [] if t.get("key") == SPARE_TAINT], made["spec"]
    landed = wait_until(lambda: next((p["node"] for p in sim.state()["pods"] if p["name"] == intruder and p["node"]),
                                     None), timeout=30, what="the intruder scheduled")
    assert landed == "node-0001", landed

    fault(sim, rank, clears_on_restart=False)
    outcome = await incident(temporal, queue, rank, policy(SAME))
    recover = notes(outcome)
    assert outcome.recovered_by == "any_node", (outcome.outcome, recover)
    assert "moved to warm spare node-0000: node-0001 had no free healthy device" in recover, recover
    assert outcome.pod is not None and outcome.pod.node == "node-0000", outcome.pod
    replacement = core.api_client.sanitize_for_serialization(core.read_namespaced_pod(outcome.pod.name, NS))
    assert replacement["metadata"]["annotations"][PINNED_BY] == outcome.incident_id
    assert replacement["metadata"]["annotations"][PINNED_NODE] == "node-0000"
    assert {"key": SPARE_TAINT, "operator": "Exists", "effect": "NoSchedule"} in replacement["spec"]["tolerations"]

    # The spare did its job: it is an ordinary node again, and the pool has no free node for another.
    await asyncio.to_thread(wait_until, lambda: not _spare(sim, "node-0000") or None, timeout=30,
                            what="node-0000 given back")
    status = await _status(guard)
    assert status.spares is not None and status.spares.pools[0].short == 1, status.spares
    assert any("drop spare node-0000" in line and "a replacement runs there" in line for line in status.history), \
        status.history


async def test_without_spares_the_rank_has_nowhere_to_go_on_its_node(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str]) -> None:
    """The same fleet with no guard keeping spares: the same_node rung finds no room and no spare, and says so
    (a later any_node rung would then wait for the scheduler to find room anywhere)."""
    temporal, queue = worker
    rank, _ = _one_rank_on_a_full_node(sim)
    fault(sim, rank, clears_on_restart=False)
    outcome = await incident(temporal, queue, rank, policy(SAME))
    recover = notes(outcome)
    assert outcome.recovered_by is None, (outcome.outcome, recover)
    assert "node node-0001 has 0 free healthy" in recover and "no warm spare of its pool has room" in recover, recover
    assert not _spare(sim, "node-0000")


async def test_a_policy_that_keeps_no_spares_gives_them_back(
        sim: SimCluster, worker: tuple[Client, str], guard: WorkflowHandle[FleetGuardWorkflow, None]) -> None:
    """Both nodes free: the guard makes the first one the spare; told a policy with per_pool 0 (the ingest
    tells a running guard the file in force when it starts), it gives it back."""
    temporal, queue = worker
    await asyncio.to_thread(wait_until, lambda: _spare(sim, "node-0000"), timeout=30, what="node-0000 a spare")
    assert not _spare(sim, "node-0001")
    told = await GuardSightings(temporal, queue).tell_policy(_keeping(0))
    assert told == "fleet guard told the policy in force (no warm spares)", told
    await asyncio.to_thread(wait_until, lambda: not _spare(sim, "node-0000") or None, timeout=30,
                            what="node-0000 given back")
    status = await _status(guard)
    assert status.spares is not None and status.spares.held == 0, status.spares


async def test_a_jobset_rank_whose_node_is_full_moves_to_the_warm_spare(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str],
        guard: WorkflowHandle[FleetGuardWorkflow, None]) -> None:
    """A JobSet's two ranks and a blocker fill node-0001; node-0000 is the spare. The failed rank's Job, recreated
    with the JobSet's restart, is pinned to the spare; the other rank's new pod, which may not tolerate the
    spare, runs on node-0001 again; the JobSet runs whole."""
    temporal, queue = worker
    hold_off = block_node(sim, "node-0000", 3)
    name = f"jss-{uuid.uuid4().hex[:5]}"
    ranks = _start_jobset(sim, api, name)
    assert {r["node"] for r in ranks} == {"node-0001"}, ranks
    block_node(sim, "node-0001", 1)
    delete_job(sim, hold_off)
    await asyncio.to_thread(wait_until, lambda: _spare(sim, "node-0000"), timeout=30, what="node-0000 a spare")
    fault(sim, ranks[0], clears_on_restart=False)
    outcome = await incident(temporal, queue, ranks[0], policy(SAME))
    recover = notes(outcome)
    assert outcome.recovered_by == "any_node", (outcome.outcome, recover)
    assert "moved to warm spare node-0000: node-0001 had no free healthy device" in recover, recover
    assert f"JobSet {name} running whole again (its status)" in recover, recover
    assert outcome.pod is not None and outcome.pod.node == "node-0000", outcome.pod
    other = [p for p in sim.state()["pods"] if p.get("job") == f"{name}-node-1" and not p["deleting"]]
    assert [p["node"] for p in other] == ["node-0001"], other


async def test_a_leaderworkerset_worker_whose_node_is_full_moves_to_the_warm_spare(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str],
        guard: WorkflowHandle[FleetGuardWorkflow, None]) -> None:
    """A LeaderWorkerSet group (leader and worker, a GPU each) and a blocker fill node-0001; node-0000 is the
    spare. Evicting the worker recreates the group (RecreateGroupOnPodRestart, the LeaderWorkerSet default):
    the worker's replacement, the group's StatefulSet pod under its own name, is pinned to the spare; the
    leader, which may not tolerate the spare, runs on node-0001 again; the group runs whole."""
    temporal, queue = worker
    hold_off = block_node(sim, "node-0000", 3)
    name = f"lwss-{uuid.uuid4().hex[:5]}"
    _create(api, "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": _template(sim, name, "Always")}}})
    leader = ready_pod(sim, lambda p: p["name"] == f"{name}-0", "the leader Ready")
    member = ready_pod(sim, lambda p: p["name"] == f"{name}-0-1", "the worker Ready")
    assert {leader["node"], member["node"]} == {"node-0001"}, (leader, member)
    block_node(sim, "node-0001", 1)
    delete_job(sim, hold_off)
    await asyncio.to_thread(wait_until, lambda: _spare(sim, "node-0000"), timeout=30, what="node-0000 a spare")
    fault(sim, member, clears_on_restart=False)
    outcome = await incident(temporal, queue, member, policy(SAME))
    recover = notes(outcome)
    assert outcome.recovered_by == "any_node", (outcome.outcome, recover)
    assert "moved to warm spare node-0000: node-0001 had no free healthy device" in recover, recover
    assert f"LeaderWorkerSet {name} running whole" in recover, recover
    assert outcome.pod is not None and outcome.pod.name == f"{name}-0-1" and outcome.pod.node == "node-0000", \
        outcome.pod
    now = ready_pod(sim, lambda p: p["name"] == f"{name}-0", "the leader Ready again")
    assert now["uid"] != leader["uid"] and now["node"] == "node-0001", now
