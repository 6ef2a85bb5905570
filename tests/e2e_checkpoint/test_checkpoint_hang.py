"""A job found hung while its checkpoint is awaited: the wait ends at ``hang_s``, not the timeout.

The shape: a synchronous job with one rank stuck in a CUDA call on a failed GPU makes no step and
saves nothing (Llama 3, arXiv 2407.21783 section 3.3.4, "stalled load/store operations"; the
simulator's collectives, podmedic_sim/collectives.py), so its ``podmedic.io/progress`` stops; a job
that is merely slow to answer keeps stepping. Simulator, dev server, real worker.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest

from podmedic.domain.policy_file import parse_policy
from podmedic.domain.steps import CheckpointStatus
from podmedic.workload.protocol import PROGRESS
from tests.e2e_checkpoint.conftest import Stack, incident_until_checkpointed, start_job
from tests.helpers import training_leaderworkerset, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _policy(timeout_s: float, hang_s: float) -> str:
    return f"""
drivers:
  default:
    node_quarantine: {{enabled: false}}
    checkpoint: {{timeout_s: {timeout_s}, poll_s: 0.1, hang_s: {hang_s}}}
    approvals: {{gates: [{{action: taint}}], timeout_s: 600, on_timeout: abort}}
  gpu.nvidia.com:
    classification: {{codes: {{permanent: [79], container_code: [13, 31, 43]}}}}
"""


def _with(stack: Stack, timeout_s: float, hang_s: float) -> Stack:
    return dataclasses.replace(stack, policy=parse_policy(_policy(timeout_s, hang_s)))


def _stepping(stack: Stack, pods: list[dict[str, object]]) -> None:
    """Wait until every pod shows the step it reached (the simulated trainer writes it each second)."""
    def shown() -> bool:
        got = [stack.kube.get_pod("default", str(p["name"]), fresh=True) for p in pods]
        return all(g and PROGRESS in (g["metadata"].get("annotations") or {}) for g in got)
    wait_until(shown, timeout=15, what="progress on every pod")


def _hang(stack: Stack, pod: dict[str, object]) -> None:
    engine = stack.sim.engine
    stack.sim.call(lambda: engine.workloads.collectives.hang(*engine.workloads.rank("default", str(pod["name"]))))


@pytest.mark.parametrize("jobset", [False, True], ids=["job", "jobset"])
async def test_a_hung_job_is_given_up_on_after_hang_s(stack: Stack, jobset: bool) -> None:
    # A JobSet's ranks are one-pod Jobs: they step together only as a trainer that declares its process
    # group does (a collective timeout well past the test).
    sync = {"collectives": {"collective_timeout_s": 600.0}} if jobset else {}
    pods = start_job(stack.sim, parallelism=2, checkpoint_method="annotation", jobset=jobset, **sync)
    await _given_up_after_hang_s(stack, pods, hung=pods[0])


async def _given_up_after_hang_s(stack: Stack, pods: list[dict[str, object]], hung: dict[str, object]) -> None:
    """``hung`` hangs once every pod steps; the device of ``pods[0]`` fails: the checkpoint gives up on both
    pods at ``hang_s`` (2 s), long before its 30 s timeout."""
    _stepping(stack, pods)
    _hang(stack, hung)
    begun = time.monotonic()
    outcome, state = await incident_until_checkpointed(_with(stack, timeout_s=30, hang_s=2), pods[0], code=79)
    took = time.monotonic() - begun
    assert state.checkpoint is not None
    assert [r.status for r in state.checkpoint.results] == [CheckpointStatus.HUNG] * 2, state.checkpoint
    assert all("workload hung" in r.reason and "hang_s 2" in r.reason for r in state.checkpoint.results)
    assert took < 20, f"waited {took:.0f}s: the 30 s timeout, not hang_s"
    assert outcome.checkpoint == "none: 0/2 pods"
    assert any("hung" in t.message for t in outcome.timeline)


async def test_a_hung_leaderworkerset_group_is_given_up_on_after_hang_s(stack: Stack) -> None:
    # A LeaderWorkerSet group shards one model over its leader and worker (kubernetes-sigs/lws README): the
    # group saves together, so the checkpoint waits on both, and a hung worker stops the group's steps.
    name = f"lws-{uuid.uuid4().hex[:5]}"
    training_leaderworkerset(stack.sim, name, size=2, checkpoint_method="annotation",
                             collectives={"collective_timeout_s": 600.0})
    try:
        def group() -> list[dict[str, object]] | None:
            pods = [p for p in stack.sim.state()["pods"] if p["name"] in (f"{name}-0", f"{name}-0-1") and p["ready"]]
            return sorted(pods, key=lambda p: str(p["name"])) if len(pods) == 2 else None

        pods = wait_until(group, timeout=30, what="the group Ready")
        await _given_up_after_hang_s(stack, pods, hung=pods[1])
    finally:
        stack.sim.call(lambda: stack.sim.store.delete("leaderworkersets", "default", name))


async def test_with_hang_s_off_a_hung_job_waits_the_whole_timeout(stack: Stack) -> None:
    pods = start_job(stack.sim, parallelism=2, checkpoint_method="annotation")
    _stepping(stack, pods)
    _hang(stack, pods[0])
    _, state = await incident_until_checkpointed(_with(stack, timeout_s=4, hang_s=0), pods[0], code=79)
    assert state.checkpoint is not None
    assert [r.status for r in state.checkpoint.results] == [CheckpointStatus.TIMED_OUT] * 2, state.checkpoint


async def test_a_job_that_steps_but_does_not_answer_is_not_hung(stack: Stack) -> None:
    # Safety: a slow or silent answer is not a hang while the steps move (written every second here;
    # hang_s leaves room for a write the loaded simulator makes late).
    pods = start_job(stack.sim, parallelism=2, checkpoint_method="annotation", checkpoint_answer="never")
    _stepping(stack, pods)
    _, state = await incident_until_checkpointed(_with(stack, timeout_s=10, hang_s=4), pods[0], code=79)
    assert state.checkpoint is not None
    assert [r.status for r in state.checkpoint.results] == [CheckpointStatus.TIMED_OUT] * 2, state.checkpoint
