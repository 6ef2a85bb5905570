"""A hang no device reports, end to end: the ingest's progress watch, the stall incident, the real worker.

Real parts: the simulator over HTTP (its collective model, ``podmedic_sim/collectives.py``, cites the
shapes: a hung rank stays Running and Ready, no rank steps, SIGTERM is not acted on, every rank's watchdog
aborts at the collective timeout, exit 134), the ingest's cluster sources as ``podmedic ingest`` runs
them, the Temporal dev server and the real worker under deploy/'s RBAC.

A two-rank job whose collective timeout is 60 s gets one rank hung. With ``detection.stall.after_s`` of
2 s the ingest sees no step for 2 s, the incident ends the rank furthest behind, the peers abort on the
lost peer, the Job controller replaces the ranks and the steps move again: long before the timeout.
With the mechanism off (``after_s: 0``) nothing is opened and the job stands still until the timeout.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import Client

from podmedic.domain.models import Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.stall import StallOutcome
from podmedic.incidents.query import list_incidents, list_query
from podmedic_sim import SimCluster
from tests.e2e_ingest.conftest import SourceSet
from tests.helpers import assert_eventually, training_leaderworkerset, wait_until
from workflows.workload_stall import WorkloadStallWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

COLLECTIVE_TIMEOUT_S = 60.0


def _policy(after_s: float) -> Any:
    return parse_policy(f"""
drivers:
  default:
    detection:
      stall: {{after_s: {after_s}, grace_s: 0, verify_s: 30}}
""")


def _job(sim: SimCluster, name: str) -> dict[str, Any]:
    return next(j for j in sim.state()["jobs"] if j["name"] == name)


def _ranks(sim: SimCluster, name: str) -> list[dict[str, Any]]:
    return [p for p in sim.state()["pods"] if (p.get("jobset") or p["job"]) == name and p["ready"]
            and not p["deleting"]]


def _hung_job(sim: SimCluster, jobset: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """A two-rank job (``jobset``: a JobSet of two one-pod Jobs) stepping, then one rank hung; its name and its
    ranks."""
    name = f"train-{uuid.uuid4().hex[:5]}"
    sim.call(lambda: sim.engine.create_training_job(
        name, parallelism=2, jobset=jobset,
        collectives={"peer_exit_s": 0.2, "collective_timeout_s": COLLECTIVE_TIMEOUT_S}))
    ranks = wait_until(lambda: (r if len(r := _ranks(sim, name)) == 2 else None), timeout=30, what="both ranks")
    wait_until(lambda: _job(sim, name)["step"] >= 3 or None, timeout=30, what="steps")
    sim.call(lambda: sim.engine.workloads.collectives.hang(*sim.engine.workloads.rank("default", ranks[1]["name"])))
    return name, ranks


async def _watched_hang(sim: SimCluster, source_sets: Callable[..., SourceSet],
                        after_s: float, jobset: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """The ingest's sources watching with a stall window of ``after_s``, then a job with a hung rank."""
    await source_sets(_policy(after_s)).watching()
    return _hung_job(sim, jobset)


@pytest.mark.parametrize("kind", ["Job", "JobSet"])
async def test_a_hung_job_is_restarted_long_before_its_collective_timeout(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet],
        kind: str) -> None:
    # A JobSet of one-pod Jobs is one synchronous job (podmedic_sim/training_groups.py); its failure policy
    # (maxRestarts, kubernetes-sigs/jobset) recreates every Job once the ended rank's Job fails.
    client, _ = ingest_worker
    name, ranks = await _watched_hang(ingest_sim, source_sets, 2, jobset=kind == "JobSet")
    hung_at, step = time.monotonic(), _job(ingest_sim, name)["step"]
    handle = client.get_workflow_handle_for(WorkloadStallWorkflow.run, f"workload/default/{kind}/{name}")
    outcome = await _result(handle, timeout=COLLECTIVE_TIMEOUT_S / 2)
    took = time.monotonic() - hung_at
    lines = "\n".join(outcome.timeline)
    assert outcome.outcome is Outcome.RESTARTED, lines
    assert outcome.ended is not None and outcome.ended.name in {r["name"] for r in ranks}, outcome.ended
    assert "no device reports a fault" in lines and "PodmedicWorkloadStalled recorded on 2 pod(s)" in lines, lines
    assert took < COLLECTIVE_TIMEOUT_S / 2, f"{took:.0f}s: no faster than the collective timeout would have been"
    assert "steps again: " in outcome.explanation and "(new) moved: step" in outcome.explanation, outcome.explanation
    # What an operator lists (`podmedic incidents list --type workload --job NAME`): visibility's record.
    async def listed() -> None:
        [row] = await list_incidents(client, list_query("workload", namespace="default", job=name), 5)
        assert row.attributes.get("PodmedicOutcome") == "restarted", row.attributes
    await assert_eventually(listed, timeout=10)
    print(f"stalled at step {step}; restarted and stepping again {took:.1f}s after the hang "
          f"(collective timeout {COLLECTIVE_TIMEOUT_S:g}s)")


async def test_a_hung_leaderworkerset_group_is_restarted_and_the_other_group_is_left_alone(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet]) -> None:
    """A LeaderWorkerSet of two groups (a leader and a worker each, one model replica per group: the
    simulator steps a group only with every pod of it, podmedic_sim/training_groups.py). A worker of group 0
    hangs: the ingest judges that group alone (group 1 steps on), the incident ends a rank of group 0, and
    LeaderWorkerSet's RecreateGroupOnPodRestart (its default, podmedic_sim/leaderworkersets.py) recreates
    the group, long before the collective timeout."""
    client, _ = ingest_worker
    await source_sets(_policy(2)).watching()
    name = f"lws-{uuid.uuid4().hex[:5]}"
    training_leaderworkerset(ingest_sim, name, replicas=2, size=2, collectives={
        "peer_exit_s": 0.2, "collective_timeout_s": COLLECTIVE_TIMEOUT_S})
    try:
        def groups() -> dict[str, dict[str, Any]] | None:
            found = {j["name"]: j for j in ingest_sim.state()["jobs"] if j.get("leaderworkerset") == name}
            return found if len(found) == 2 and all(j["step"] >= 3 for j in found.values()) else None

        await asyncio.to_thread(wait_until, groups, timeout=30, what="both groups stepping")
        group_0 = {p["uid"] for p in ingest_sim.state()["pods"] if p["name"] in (f"{name}-0", f"{name}-0-1")}
        ingest_sim.call(lambda: ingest_sim.engine.workloads.collectives.hang(
            *ingest_sim.engine.workloads.rank("default", f"{name}-0-1")))
        hung_at = time.monotonic()
        handle = client.get_workflow_handle_for(WorkloadStallWorkflow.run,
                                                f"workload/default/LeaderWorkerSet/{name}/0")
        outcome = await _result(handle, timeout=COLLECTIVE_TIMEOUT_S / 2)
        took = time.monotonic() - hung_at
        lines = "\n".join(outcome.timeline)
        assert outcome.outcome is Outcome.RESTARTED, lines
        assert outcome.ended is not None and outcome.ended.uid in group_0, outcome.ended
        assert f"LeaderWorkerSet default/{name} group 0" in lines, lines
        assert took < COLLECTIVE_TIMEOUT_S / 2, f"{took:.0f}s: no faster than the collective timeout would have been"
        ids = f"WorkflowId IN ('workload/default/LeaderWorkerSet/{name}/1', 'workload/default/LeaderWorkerSet/{name}')"
        others = [wf async for wf in client.list_workflows(ids)]
        assert not others, "a stall incident opened for the group that stepped on, or for the whole set"
    finally:
        ingest_sim.call(lambda: ingest_sim.store.delete("leaderworkersets", "default", name))


async def test_with_the_window_at_zero_a_hung_job_waits_for_its_own_timeout(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet]) -> None:
    client, _ = ingest_worker
    name, _ = await _watched_hang(ingest_sim, source_sets, 0)
    await asyncio.sleep(6)  # three windows of the other test: what must not happen has no condition to wait for
    opened = [wf async for wf in client.list_workflows(f"WorkflowId = 'workload/default/Job/{name}'")]
    assert not opened, "a stall incident opened with the mechanism off"
    assert len(_ranks(ingest_sim, name)) == 2, "the hung job was left alone"


async def _result(handle: Any, timeout: float) -> StallOutcome:
    """The stall incident's outcome, once the ingest opened it and it closed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            left = max(1.0, deadline - time.monotonic())
            result: StallOutcome = await asyncio.wait_for(handle.result(), timeout=left)
            return result
        except Exception:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.5)
