"""The maintenance incident's decisions on the time-skipping server, with fake activities under the real names:
a new deadline plans again and acts once, at the new moment; a notice withdrawn before the moment ends it with
nothing done; canceled after the cordon it lifts the cordon; a node not back in time keeps its cordon; a
notice that could not be read is refused.

The end-to-end proof on the simulator is tests/e2e_ingest/test_maintenance.py; this covers the paths it does
not take. Started as the ingest starts it (``deliver_maintenance``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.maintenance import NodeBack, NodeBackInput
from podmedic.domain.maintenance import MaintenanceNotice, MaintenanceOutcome, MaintenancePlan, MovingPod, PlanInput
from podmedic.domain.node import QuarantineInput, QuarantineResult
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.steps import CheckpointInput, CheckpointReport, RecoverInput, RecoveryResult
from tests.workflow.fakes import DEVICE, POD, incident_worker
from tests.workflow.operator_helpers import own_time_skipping_env
from workers.ingest.starts import deliver_maintenance
from workflows.node.maintenance import NodeMaintenanceWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
POLICY = parse_policy("""
drivers:
  default:
    checkpoint: {timeout_s: 60}
    maintenance: {lead_s: 120, back_s: 600, poll_s: 30}
""")


@pytest_asyncio.fixture(loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async for server in own_time_skipping_env():
        yield server


class Fakes:
    """The node's one pod; the node comes back after ``down_polls`` reads not Ready (never, with ``None``)."""

    def __init__(self, down_polls: int | None = 1, checkpoint_fails: bool = False) -> None:
        self.calls: Counter[str] = Counter()
        self.down_polls = down_polls
        self.checkpoint_fails = checkpoint_fails
        self.checkpoint_at: list[dt.datetime] = []

    def activities(self) -> list[Any]:
        @activity.defn(name="plan_maintenance")
        async def plan_maintenance(inp: PlanInput) -> MaintenancePlan:
            self.calls["plan"] += 1
            return MaintenancePlan(pods=[MovingPod(pod=POD, device=DEVICE, save_s=inp.default_save_s)],
                                   save_s=inp.default_save_s, room="room for 1 pod(s)", enough_room=True)

        @activity.defn(name="quarantine_node")
        async def quarantine_node(inp: QuarantineInput) -> QuarantineResult:
            self.calls["cordon"] += 1
            return QuarantineResult(node_found=True, changed=True, detail="cordoned")

        @activity.defn(name="lift_quarantine")
        async def lift_quarantine(inp: QuarantineInput) -> QuarantineResult:
            self.calls["uncordon"] += 1
            return QuarantineResult(node_found=True, changed=True, detail="uncordoned")

        @activity.defn(name="request_checkpoints")
        async def request_checkpoints(inp: CheckpointInput) -> CheckpointReport:
            self.calls["checkpoint"] += 1
            self.checkpoint_at.append(activity.info().scheduled_time)
            if self.checkpoint_fails:
                raise ApplicationError("pods is forbidden", type="Forbidden", non_retryable=True)
            return CheckpointReport(request_id=inp.request_id, results=[])

        @activity.defn(name="reschedule_any_node")
        async def reschedule_any_node(inp: RecoverInput) -> RecoveryResult:
            self.calls["move"] += 1
            assert inp.move_off
            return RecoveryResult(verified=True, action="any_node", pod=POD.model_copy(update={"node": "node-9"}),
                                  detail="moved")

        @activity.defn(name="node_back")
        async def node_back(inp: NodeBackInput) -> NodeBack:
            self.calls["node_back"] += 1
            if self.down_polls is None or self.calls["node_back"] <= self.down_polls:
                return NodeBack(back=False, down=True, detail=f"node {inp.node} down for its maintenance")
            return NodeBack(back=True, down=False, detail=f"node {inp.node} Ready, no maintenance announced")

        return [plan_maintenance, quarantine_node, lift_quarantine, request_checkpoints, reschedule_any_node,
                node_back]


def _notice(deadline: dt.datetime | None, problem: str = "", tag: str = "") -> MaintenanceNotice:
    stamp = int(deadline.timestamp()) if deadline else "none"
    return MaintenanceNotice(node="node-0000", deadline=deadline, source="node label", problem=problem,
                             observed_at=dt.datetime.now(dt.UTC), event_id=f"maintenance/node-0000@{stamp}{tag}")


async def _start(env: WorkflowEnvironment, task_queue: str, notice: MaintenanceNotice
                 ) -> WorkflowHandle[NodeMaintenanceWorkflow, MaintenanceOutcome]:
    run_id, note = await deliver_maintenance(env.client, notice, POLICY, task_queue=task_queue,
                                             search_attributes=False)
    assert run_id, note
    return env.client.get_workflow_handle_for(NodeMaintenanceWorkflow.run, notice.workflow_id)


async def _closed(env: WorkflowEnvironment, handle: WorkflowHandle[NodeMaintenanceWorkflow, MaintenanceOutcome],
                  step: dt.timedelta = dt.timedelta(minutes=5)) -> MaintenanceOutcome:
    for _ in range(60):  # time moved on by hand, as tests/workflow/test_workload_stall.py does
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return await handle.result()
        await env.sleep(step)
    raise AssertionError(f"{handle.id} still running")


async def test_a_new_deadline_plans_again_and_acts_once_at_the_new_moment(env: WorkflowEnvironment,
                                                                          task_queue: str) -> None:
    fakes = Fakes()
    now = await env.get_current_time()
    first = now + dt.timedelta(hours=1)
    later = now + dt.timedelta(hours=3)
    async with incident_worker(env.client, task_queue, [NodeMaintenanceWorkflow], fakes.activities()):
        handle = await _start(env, task_queue, _notice(first))
        await env.sleep(dt.timedelta(minutes=10))
        assert fakes.calls["checkpoint"] == 0
        await deliver_maintenance(env.client, _notice(later), POLICY, task_queue=task_queue, search_attributes=False)
        outcome = await _closed(env, handle)
    lines = "\n".join(outcome.timeline)
    assert outcome.outcome == "moved", lines
    assert "the notice changed: planning again" in lines, lines
    assert fakes.calls["checkpoint"] == 1 and fakes.calls["move"] == 1 and fakes.calls["cordon"] == 1
    assert fakes.calls["uncordon"] == 1, "the node is back: its cordon lifted"
    moment = later - dt.timedelta(seconds=60 + 120)
    assert abs((fakes.checkpoint_at[0] - moment).total_seconds()) < 60, (fakes.checkpoint_at, moment)
    assert outcome.moved == ["default/train-abcde -> train-abcde on node-9"], outcome.moved


async def test_a_notice_withdrawn_before_the_moment_ends_it_with_nothing_done(env: WorkflowEnvironment,
                                                                               task_queue: str) -> None:
    fakes = Fakes()
    deadline = await env.get_current_time() + dt.timedelta(hours=1)
    async with incident_worker(env.client, task_queue, [NodeMaintenanceWorkflow], fakes.activities()):
        handle = await _start(env, task_queue, _notice(deadline))
        await env.sleep(dt.timedelta(minutes=5))
        run_id, _ = await deliver_maintenance(env.client, _notice(None), POLICY, task_queue=task_queue,
                                              search_attributes=False)
        assert run_id, "the open incident is told"
        outcome = await _closed(env, handle)
    assert outcome.outcome == "withdrawn", outcome.timeline
    assert fakes.calls["cordon"] == fakes.calls["checkpoint"] == fakes.calls["move"] == 0


async def test_canceled_after_the_cordon_it_lifts_the_cordon(env: WorkflowEnvironment, task_queue: str) -> None:
    fakes = Fakes(down_polls=None)
    deadline = await env.get_current_time() + dt.timedelta(minutes=30)
    async with incident_worker(env.client, task_queue, [NodeMaintenanceWorkflow], fakes.activities()):
        handle = await _start(env, task_queue, _notice(deadline))
        for _ in range(20):
            if fakes.calls["move"]:
                break
            await env.sleep(dt.timedelta(minutes=5))
        assert fakes.calls["cordon"] == 1 and fakes.calls["move"] == 1
        await handle.cancel()
        for _ in range(20):
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                break
            await env.sleep(dt.timedelta(seconds=30))
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert fakes.calls["uncordon"] == 1


async def test_a_node_not_back_in_time_keeps_its_cordon_and_says_so(env: WorkflowEnvironment,
                                                                   task_queue: str) -> None:
    fakes = Fakes(down_polls=None)
    deadline = await env.get_current_time() + dt.timedelta(minutes=30)
    async with incident_worker(env.client, task_queue, [NodeMaintenanceWorkflow], fakes.activities()):
        outcome = await _closed(env, await _start(env, task_queue, _notice(deadline)))
    assert outcome.outcome == "node_not_back", outcome.timeline
    assert "left for a person" in outcome.explanation and fakes.calls["uncordon"] == 0


async def test_a_notice_that_could_not_be_read_is_refused_saying_what_was_wrong(env: WorkflowEnvironment,
                                                                                task_queue: str) -> None:
    fakes = Fakes()
    bad = _notice(None, problem="node node-0000 label x='soon': not a time in Unix seconds", tag="bad")
    async with incident_worker(env.client, task_queue, [NodeMaintenanceWorkflow], fakes.activities()):
        outcome = await _closed(env, await _start(env, task_queue, bad))
    assert outcome.outcome == "refused" and "'soon': not a time in Unix seconds" in outcome.explanation
    assert sum(fakes.calls.values()) == 0


async def test_a_dry_run_plans_and_says_what_it_would_do_at_the_moment(env: WorkflowEnvironment,
                                                                       task_queue: str) -> None:
    fakes = Fakes()
    dry = parse_policy("""
drivers:
  default:
    dry_run: true
    maintenance: {lead_s: 120}
""")
    deadline = await env.get_current_time() + dt.timedelta(minutes=30)
    async with incident_worker(env.client, task_queue, [NodeMaintenanceWorkflow], fakes.activities()):
        run_id, _ = await deliver_maintenance(env.client, _notice(deadline), dry, task_queue=task_queue,
                                              search_attributes=False)
        assert run_id
        outcome = await _closed(env, env.client.get_workflow_handle_for(NodeMaintenanceWorkflow.run,
                                                                        "maintenance/node-0000"))
    assert outcome.outcome == "dry_run" and "would cordon node-0000, checkpoint and move 1 pod(s)" in \
        outcome.explanation, outcome.explanation
    assert fakes.calls["plan"] >= 1 and fakes.calls["cordon"] == fakes.calls["checkpoint"] == fakes.calls["move"] == 0


async def test_a_call_that_keeps_failing_ends_it_failed_naming_it_and_lifts_the_cordon(env: WorkflowEnvironment,
                                                                                        task_queue: str) -> None:
    fakes = Fakes(checkpoint_fails=True)
    deadline = await env.get_current_time() + dt.timedelta(minutes=30)
    async with incident_worker(env.client, task_queue, [NodeMaintenanceWorkflow], fakes.activities()):
        outcome = await _closed(env, await _start(env, task_queue, _notice(deadline)))
    assert outcome.outcome == "failed", outcome.timeline
    assert "request_checkpoints kept failing" in outcome.explanation and "pods is forbidden" in outcome.explanation
    assert fakes.calls["cordon"] == 1 and fakes.calls["uncordon"] == 1 and fakes.calls["move"] == 0
