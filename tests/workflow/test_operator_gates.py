"""Approval gates on the time-skipping server: approve, skip, abort, and both timeouts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import AbortRequest, ApprovalRequest, Phase, SkipRequest
from podmedic.domain.models import DeviceRef, Health, Outcome
from podmedic.domain.policy_file import parse_policy
from tests.workflow.fakes import FakeCluster
from tests.workflow.operator_helpers import open_incident, outcome_of, own_time_skipping_env, state_in, worker
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 60, poll_s: 5}
    classification: {codes: {permanent: [79]}}
    approvals:
      gates: [{action: taint_no_execute}, {action: ticket, timeout_s: 120, on_timeout: proceed}]
      timeout_s: 600
      on_timeout: abort
""")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async for server in own_time_skipping_env():
        yield server


def _device(n: int) -> DeviceRef:
    return DeviceRef(driver="gpu.nvidia.com", pool="node-0200", device=f"gpu-{n}")


async def test_approved_gate_goes_on_and_records_who(env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakeCluster()
    fake.health = Health.UNHEALTHY
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, _device(0), POLICY)
        state = await state_in(handle, Phase.AWAITING_APPROVAL)
        assert state.pending_approval is not None and state.pending_approval.step == "taint"
        assert state.pending_approval.gate == "taint_no_execute" and "NoExecute" in state.pending_approval.action
        assert fake.taint_effects == ["NoSchedule"]  # the fence is not gated: only the evicting raise is
        answer = await handle.execute_update(DeviceIncidentWorkflow.approve,
                                             ApprovalRequest(step="taint", by="alice", note="drained"))
        assert answer.accepted.startswith("taint approved by alice")
        # The ticket gate then times out and proceeds (on_timeout: proceed), as the policy says.
        outcome = await outcome_of(env, handle)
    assert fake.taint_effects == ["NoSchedule", "NoExecute"] and fake.calls["file_ticket"] == 1
    assert outcome.outcome is Outcome.RESOLVED_BY_VENDOR
    decisions = [(d.step, d.decision, d.by) for d in outcome.decisions]
    assert decisions == [("taint", "approved", "alice"), ("ticket", "timed_out_proceed", "policy")]
    steps = [n.step for n in fake.notices]
    assert steps.count("awaiting_approval") == 2
    # The fence is told in the opening Event (fold-step-notices, workflows/record/pod_notices.py).
    assert (steps.index("opened") < steps.index("awaiting_approval") < steps.index("taint_raised")
            < steps.index("ticketed") < steps.index("closed"))


async def test_unanswered_gate_aborts_per_policy(env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakeCluster()
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, _device(1), POLICY)
        outcome = await outcome_of(env, handle)  # time skips past the 600 s gate
    assert outcome.outcome is Outcome.ABORTED
    assert "approval of taint not given within 600s" in outcome.explanation
    assert [(d.step, d.decision, d.by) for d in outcome.decisions] == [("taint", "timed_out_abort", "policy")]
    # The fence stays, as anything done before an abort (docs/operators.md); nothing evicted.
    assert fake.taint_effects == ["NoSchedule"] and fake.calls["reschedule_same_node"] == 0


async def test_abort_while_waiting_stops_before_acting(env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakeCluster()
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, _device(2), POLICY)
        await state_in(handle, Phase.AWAITING_APPROVAL)
        await handle.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="bob", reason="wrong device"))
        outcome = await outcome_of(env, handle)
    assert outcome.outcome is Outcome.ABORTED
    assert outcome.explanation == "aborted by bob: wrong device"
    assert [(d.step, d.decision, d.by) for d in outcome.decisions] == [("taint", "aborted", "bob")]
    assert fake.taint_effects == ["NoSchedule"]
    assert fake.notices[-1].step == "closed" and "aborted by bob" in fake.notices[-1].message


async def test_skipping_the_gated_step_goes_on_without_it(env: WorkflowEnvironment,
                                                          task_queue: str) -> None:
    client = env.client
    fake = FakeCluster()
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, _device(3), POLICY)
        await state_in(handle, Phase.AWAITING_APPROVAL)
        await handle.execute_update(DeviceIncidentWorkflow.skip,
                                    SkipRequest(step="taint", by="carol", reason="node drained by hand"))
        outcome = await outcome_of(env, handle)
    assert fake.taint_effects == ["NoSchedule"] and fake.calls["reschedule_same_node"] == 1
    assert outcome.taint_rule is not None  # the fence, never raised to NoExecute
    assert ("taint", "skipped", "carol") in [(d.step, d.decision, d.by) for d in outcome.decisions]
    assert any("left at NoSchedule: skipped by an operator" in t.message
               for t in outcome.timeline if t.step == "taint")


async def test_a_transient_fault_is_not_gated_by_a_no_execute_gate(env: WorkflowEnvironment,
                                                                    task_queue: str) -> None:
    client = env.client
    fake = FakeCluster()
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, _device(4), POLICY, code=31)
        outcome = await outcome_of(env, handle)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE  # NoSchedule taint: the NoExecute gate does not hold it
    assert outcome.decisions == []
