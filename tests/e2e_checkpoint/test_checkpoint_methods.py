"""Each checkpoint method end to end: simulator (HTTP, pod and node proxy), dev server, real worker."""

from __future__ import annotations

import asyncio

import pytest

from podmedic.domain import describe
from podmedic.domain.steps import CheckpointAggregate, CheckpointStatus
from tests.e2e_checkpoint.conftest import Stack, annotate, incident_until_checkpointed, start_job
from tests.helpers import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _job(sim_state: dict[str, object], name: str) -> dict[str, object]:
    jobs = sim_state["jobs"]
    assert isinstance(jobs, list)
    found: dict[str, object] = next(j for j in jobs if j["name"] == name)
    return found


async def test_annotation_answered(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="annotation")
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SAVED, result
    saved = _job(stack.sim.state(), pod["job"])
    assert result.checkpoint_id == saved["last_checkpoint_id"] == f"{pod['job']}-step-{saved['requested_step']}"
    assert result.location == f"sim://default/{pod['job']}/step-{saved['requested_step']}"
    assert outcome.checkpoint == "complete: 1/1 pods"
    assert outcome.checkpoint_ids == [result.checkpoint_id]
    assert any("checkpoint complete: 1/1 pods" in t.message for t in outcome.timeline)


async def test_annotation_timed_out_keeps_last_known(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="annotation", checkpoint_answer="never")
    annotate(stack.sim, pod, **{"podmedic.io/checkpoint-id": "own-step-7"})
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.TIMED_OUT, result
    assert result.checkpoint_id == "own-step-7" and "no answer within" in result.reason
    assert outcome.checkpoint == "none: 0/1 pods"
    assert _job(stack.sim.state(), pod["job"])["requested_step"] == -1


async def test_job_of_three_one_never_answers_is_partial(stack: Stack) -> None:
    pods = start_job(stack.sim, parallelism=3, checkpoint_method="annotation")
    silent = pods[2]
    annotate(stack.sim, silent, **{"sim.podmedic.io/checkpoint-answer": "never"})
    outcome, state = await incident_until_checkpointed(stack, pods[0])
    assert state.checkpoint is not None
    by_pod = {r.pod: r for r in state.checkpoint.results}
    assert set(by_pod) == {p["name"] for p in pods}  # the job's other pods were asked too
    assert [p.name for p in state.pods] == [pods[0]["name"]]  # ...but only the device's pod is recovered
    assert by_pod[silent["name"]].status is CheckpointStatus.TIMED_OUT
    assert [by_pod[p["name"]].status for p in pods[:2]] == [CheckpointStatus.SAVED] * 2
    assert state.checkpoint.aggregate is CheckpointAggregate.PARTIAL
    assert outcome.checkpoint == "partial: 2/3 pods"
    requests = {stack.kube.get_pod("default", p["name"])["metadata"]["annotations"]  # type: ignore[index]
                ["podmedic.io/checkpoint-request"] for p in pods}
    assert requests == {state.checkpoint.request_id}  # one request id for the whole job
    assert "**Checkpoint**: partial: 2/3 pods" in describe.current_details(state)  # what the Temporal UI shows


async def test_permanent_fault_skips_and_records_last_known(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="annotation")
    annotate(stack.sim, pod, **{"podmedic.io/checkpoint-id": "own-step-3"})
    outcome, state = await incident_until_checkpointed(stack, pod, code=79, crash=True)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SKIPPED and result.checkpoint_id == "own-step-3"
    assert "permanently" in result.reason
    assert outcome.checkpoint_ids == ["own-step-3"] and outcome.checkpoint == "none: 0/1 pods"
    assert any("last known checkpoint(s): own-step-3" in t.message for t in outcome.timeline)


async def test_permanent_fault_still_checkpoints_a_pod_whose_process_runs(stack: Stack) -> None:
    # XID 79 without a crash: the process runs on (for a while) and can still save its state.
    [pod] = start_job(stack.sim, checkpoint_method="annotation")
    _, state = await incident_until_checkpointed(stack, pod, code=79, crash=False)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SAVED, result
    assert result.checkpoint_id and result.checkpoint_id.startswith(f"{pod['job']}-step-")


@pytest.mark.parametrize(("method", "reason"), [
    (None, "pod declares no podmedic.io/checkpoint-method"),
    ("none", "pod declares podmedic.io/checkpoint-method: none"),
    ("criu", "podmedic.io/checkpoint-method: unknown method 'criu' (valid: annotation, http, kubelet, none)"),
])
async def test_skipped_without_a_usable_method(stack: Stack, method: str | None, reason: str) -> None:
    [pod] = start_job(stack.sim, checkpoint_method=method)
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SKIPPED and result.reason == reason
    assert outcome.checkpoint == "none: 0/1 pods"


async def test_http_answered_through_the_pod_proxy(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="http")
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SAVED and result.method == "http", result
    step = _job(stack.sim.state(), pod["job"])["requested_step"]
    assert result.checkpoint_id == f"{pod['job']}-step-{step}"
    notes = stack.kube.get_pod("default", pod["name"])["metadata"]["annotations"]  # type: ignore[index]
    assert notes["podmedic.io/checkpoint-ack"] == state.checkpoint.request_id  # recorded for retries
    assert notes["podmedic.io/checkpoint-id"] == result.checkpoint_id
    assert outcome.checkpoint == "complete: 1/1 pods"


async def test_http_timed_out(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="http", checkpoint_answer="never")
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.TIMED_OUT and "did not answer" in result.reason, result
    assert outcome.checkpoint == "none: 0/1 pods"


async def test_http_workload_failure_is_reported(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="http", checkpoint_answer="fail")
    _, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.FAILED and "endpoint answered 500" in result.reason, result


async def test_kubelet_answered_through_the_node_proxy(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="kubelet")
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SAVED and result.method == "kubelet", result
    [archive] = result.locations
    assert archive.startswith(f"/var/lib/kubelet/checkpoints/checkpoint-{pod['name']}_default-trainer-")
    assert archive.endswith(".tar") and result.checkpoint_id == archive.rsplit("/", 1)[1].removesuffix(".tar")
    made = [c for c in stack.sim.state()["kubelet_checkpoints"] if c["pod"] == pod["name"]]
    assert [c["archive"] for c in made] == [archive] and made[0]["node"] == pod["node"]
    assert outcome.checkpoint == "complete: 1/1 pods"


async def test_a_pod_that_has_terminated_is_not_asked_and_not_waited_for(stack: Stack) -> None:
    # The trainer never answers, so waiting for it would end in a timeout; but its process has already
    # exited (restartPolicy Never, exit 1: phase Failed, which a pod never leaves: k8s.io/api core/v1
    # PodPhase), so the step is skipped at once with the last known checkpoint.
    [pod] = start_job(stack.sim, checkpoint_method="annotation", checkpoint_answer="never")
    annotate(stack.sim, pod, **{"podmedic.io/checkpoint-id": "own-step-7"})
    stack.sim.call(lambda: stack.sim.engine.kubelet.exit_container(
        stack.sim.engine.kubelet.pods[(pod["namespace"], pod["name"])],
        stack.sim.engine.kubelet.pods[(pod["namespace"], pod["name"])].containers[0], 1))
    await asyncio.to_thread(wait_until, lambda: (stack.kube.get_pod(pod["namespace"], pod["name"]) or {})
                            .get("status", {}).get("phase") == "Failed", timeout=10, what="the pod Failed")
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SKIPPED, result
    assert result.reason == "pod has terminated (phase Failed): nothing runs to save a checkpoint"
    assert result.checkpoint_id == "own-step-7"
    notes = stack.kube.get_pod(pod["namespace"], pod["name"])["metadata"]["annotations"]  # type: ignore[index]
    assert "podmedic.io/checkpoint-request" not in notes  # not asked
    assert any("last known checkpoint(s): own-step-7" in t.message for t in outcome.timeline)
