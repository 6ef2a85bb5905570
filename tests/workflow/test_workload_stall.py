"""The stall incident's decisions on the time-skipping server, with fake activities under the real names:
held by the fleet guard it waits and says so; steps that move before it acts end it with nothing done; a
dry run does nothing; a deletion that keeps failing ends it ``failed`` and says which call.

The end-to-end proof on the simulator is tests/e2e_ingest/test_workload_stall.py; this covers the paths
a simulated hang does not take.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.stall import EndRankInput, StepsReading, WatchStepsInput
from podmedic.domain.fleet_guard.messages import PermitAnswer, PermitRelease, PermitRequest
from podmedic.domain.incident import StepNotice, StepNoticeResult
from podmedic.domain.models import Outcome, PodKey
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.stall import StalledPod, StallOutcome, WorkloadStall
from tests.workflow.fakes import incident_worker
from tests.workflow.operator_helpers import own_time_skipping_env
from workers.ingest.starts import deliver_stall
from workflows.workload_stall import WorkloadStallWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async for server in own_time_skipping_env():
        yield server


class Fakes:
    """The stall incident's activities: steps as the test sets them, a guard that holds ``held`` times."""

    def __init__(self, *, held: int = 0, moved_before: str = "", end_fails: bool = False) -> None:
        self.calls: Counter[str] = Counter()
        self.held, self.moved_before, self.end_fails = held, moved_before, end_fails
        self.ended: list[EndRankInput] = []

    def activities(self) -> list[Any]:
        @activity.defn(name="watch_steps")
        async def watch_steps(inp: WatchStepsInput) -> StepsReading:
            self.calls["watch_steps"] += 1
            if inp.timeout_s == 0:
                return StepsReading(moved=self.moved_before, steps={"llm-a": "7", "llm-b": "7"})
            return StepsReading(moved="llm-c (new) moved: step 5 -> 6", steps={"llm-c": "6"})

        @activity.defn(name="end_stalled_rank")
        async def end_stalled_rank(inp: EndRankInput) -> bool:
            self.calls["end_stalled_rank"] += 1
            if self.end_fails:
                raise ApplicationError("pods is forbidden", type="Forbidden", non_retryable=True)
            self.ended.append(inp)
            return True

        @activity.defn(name="notify_step")
        async def notify_step(notice: StepNotice) -> StepNoticeResult:
            self.calls[notice.reason] += 1
            return StepNoticeResult(recorded=[p.name for p in notice.pods])

        @activity.defn(name="ask_guard")
        async def ask_guard(req: PermitRequest) -> PermitAnswer:
            self.calls["ask_guard"] += 1
            if self.calls["ask_guard"] <= self.held:
                return PermitAnswer(granted=False, limit="max_driver_share", detail="3/10 devices disrupted")
            return PermitAnswer(granted=True, detail="within limits")

        @activity.defn(name="release_guard")
        async def release_guard(inp: PermitRelease) -> bool:
            self.calls["release_guard"] += 1
            return True

        return [watch_steps, end_stalled_rank, notify_step, ask_guard, release_guard]


def _stall(name: str) -> WorkloadStall:
    pods = [StalledPod(pod=PodKey(namespace="ml", name=f"{name}-{x}", uid=f"uid-{x}"), node="node-1", step=step,
                       device=f"gpu.nvidia.com/node-1/gpu-{i}") for i, (x, step) in enumerate((("a", "7"), ("b", "6")))]
    return WorkloadStall(namespace="ml", kind="JobSet", name=name, driver="gpu.nvidia.com", pods=pods, stalled_s=320,
                         after_s=300, observed_at=dt.datetime(2026, 11, 30, tzinfo=dt.UTC), event_id=f"progress/{name}")


def _policy(extra: str = "") -> Any:
    return parse_policy(f"""
guard: {{enabled: true, retry_s: 30}}
drivers:
  default:
    detection: {{stall: {{after_s: 300, grace_s: 30, verify_s: 900}}}}
    {extra}
""")


async def _run(env: WorkflowEnvironment, task_queue: str, fakes: Fakes, name: str, policy: Any) -> StallOutcome:
    async with incident_worker(env.client, task_queue, [WorkloadStallWorkflow], fakes.activities()):
        assert await deliver_stall(env.client, _stall(name), policy, task_queue=task_queue, search_attributes=False)
        handle = env.client.get_workflow_handle_for(WorkloadStallWorkflow.run, f"workload/ml/JobSet/{name}")
        for _ in range(40):  # time moved on by hand, as tests/workflow/operator_helpers.py outcome_of does
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                return await handle.result()
            await env.sleep(dt.timedelta(seconds=15))
        raise AssertionError(f"{handle.id} still running")


async def test_held_by_the_guard_it_waits_then_ends_the_rank_furthest_behind(env: WorkflowEnvironment,
                                                                              task_queue: str) -> None:
    fakes = Fakes(held=2)
    outcome = await _run(env, task_queue, fakes, "held", _policy())
    lines = "\n".join(outcome.timeline)
    assert outcome.outcome is Outcome.RESTARTED, lines
    assert [e.pod.name for e in fakes.ended] == ["held-b"], "b stood at step 6, behind a's 7"
    assert fakes.ended[0].grace_s == 30 and fakes.ended[0].pod.uid == "uid-b"
    assert "fleet guard holds ending a rank (max_driver_share): 3/10 devices disrupted" in lines, lines
    assert fakes.calls["ask_guard"] == 3 and fakes.calls["release_guard"] == 1
    assert fakes.calls["PodmedicWorkloadStalled"] == 1 and fakes.calls["PodmedicWorkloadRestarted"] == 1


async def test_steps_that_moved_before_it_acted_end_it_with_nothing_done(env: WorkflowEnvironment,
                                                                         task_queue: str) -> None:
    fakes = Fakes(moved_before="moved-a moved: step 7 -> 8")
    outcome = await _run(env, task_queue, fakes, "moved", _policy())
    assert outcome.outcome is Outcome.CLEARED and "moving again before podmedic acted" in outcome.explanation
    assert fakes.calls["end_stalled_rank"] == 0 and fakes.calls["ask_guard"] == 0


async def test_a_dry_run_says_what_it_would_do_and_does_nothing(env: WorkflowEnvironment, task_queue: str) -> None:
    fakes = Fakes()
    outcome = await _run(env, task_queue, fakes, "dry", _policy("dry_run: true"))
    assert outcome.outcome is Outcome.DRY_RUN and "would end rank dry-b" in outcome.explanation, outcome.explanation
    assert fakes.calls["end_stalled_rank"] == 0 and fakes.calls["PodmedicWorkloadStalled"] == 0


async def test_a_deletion_that_keeps_failing_ends_it_failed_naming_the_call(env: WorkflowEnvironment,
                                                                            task_queue: str) -> None:
    fakes = Fakes(end_fails=True)
    outcome = await _run(env, task_queue, fakes, "refused", _policy())
    assert outcome.outcome is Outcome.FAILED, outcome.explanation
    assert "end_stalled_rank kept failing" in outcome.explanation and "pods is forbidden" in outcome.explanation
    assert fakes.calls["release_guard"] == 1, "the permit is given back"
