"""Operator updates on the time-skipping server: accepted ones change the incident and say
so, rejected ones say why and leave no trace; the query returns state and timeline."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from podmedic.domain.incident import AbortRequest, ApprovalRequest, Phase, Resolution, SkipRequest
from podmedic.domain.models import DeviceRef, Health, Outcome
from podmedic.domain.policy_file import parse_policy
from tests.workflow.fakes import FakeCluster
from tests.workflow.operator_helpers import (
    open_incident,
    outcome_of,
    own_time_skipping_env,
    rejected,
    state_in,
    worker,
)
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 3600, poll_s: 60}
    classification: {codes: {permanent: [79]}}
    approvals: {gates: [{action: same_node}], timeout_s: 600, on_timeout: abort}
""")
WF = DeviceIncidentWorkflow


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async for server in own_time_skipping_env():
        yield server


def _device(n: int) -> DeviceRef:
    return DeviceRef(driver="gpu.nvidia.com", pool="node-0300", device=f"gpu-{n}")


async def test_rejected_updates_say_why_and_leave_no_trace(env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakeCluster()
    fake.health = Health.UNHEALTHY
    fake.ticket_state = "open"
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, _device(0), POLICY)
        before = await state_in(handle, Phase.AWAITING_APPROVAL)
        assert before.pending_approval is not None and before.pending_approval.step == "same_node"

        assert "waits for approval of 'same_node', not 'taint'" in await rejected(
            handle, WF.approve, ApprovalRequest(step="taint", by="alice"))
        assert "'by' must name who is acting" in await rejected(
            handle, WF.approve, ApprovalRequest(step="same_node", by=" "))
        assert "a reason is required" in await rejected(handle, WF.abort, AbortRequest(by="bob", reason=""))
        assert "unknown step 'reboot'" in await rejected(handle, WF.skip, SkipRequest(step="reboot", by="bob"))
        assert "taint already ran" in await rejected(handle, WF.skip, SkipRequest(step="taint", by="bob"))

        after = await handle.query(WF.get_state)
        assert after.timeline == before.timeline and after.decisions == []
        history = await handle.fetch_history()
        updates = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
        assert updates == []  # a validator's rejection is never written to history

        # Accepted: skip the ticket ahead of time, approve the gate, resolve; a second resolve is refused.
        answer = await handle.execute_update(WF.skip, SkipRequest(step="ticket", by="bob", reason="RMA by phone"))
        assert answer.accepted == "ticket will be skipped (bob: RMA by phone)"
        assert "ticket is already skipped" in await rejected(handle, WF.skip, SkipRequest(step="ticket", by="bob"))
        # Held in recovery: without a ticket the incident would close before a second approve lands.
        recovery = fake.hold("reschedule_same_node")
        await handle.execute_update(WF.approve, ApprovalRequest(step="same_node", by="alice"))
        assert "nothing waits for approval (phase Recovering)" in await rejected(
            handle, WF.approve, ApprovalRequest(step="same_node", by="alice"))
        recovery.set()
        outcome = await outcome_of(env, handle)

    assert fake.calls["reschedule_same_node"] == 1 and fake.calls["file_ticket"] == 0
    assert outcome.outcome is Outcome.QUARANTINED  # no ticket: the device stays tainted for an operator
    assert [(d.step, d.decision, d.by) for d in outcome.decisions] == [
        ("ticket", "skipped", "bob"), ("same_node", "approved", "alice")]
    await Replayer(workflows=[WF], data_converter=client.data_converter).replay_workflow(
        await handle.fetch_history())


async def test_resolve_and_abort_updates(env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakeCluster()
    fake.health = Health.UNHEALTHY
    fake.ticket_state = "open"
    policy = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 3600, poll_s: 60}
    classification: {codes: {permanent: [79]}}
""")
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, _device(1), policy)
        await state_in(handle, Phase.AWAITING_VENDOR)
        fake.health = Health.HEALTHY  # the board was swapped: the incident verifies it before untainting
        verify = fake.hold("read_device_health")  # keeps the incident open for the second resolve
        answer = await handle.execute_update(WF.resolve_update, Resolution(by="vendor-desk", note="board swapped"))
        assert answer.accepted == "resolved by vendor-desk: board swapped"
        assert "already resolved by vendor-desk" in await rejected(handle, WF.resolve_update, Resolution(by="x"))
        verify.set()
        outcome = await outcome_of(env, handle)
        assert outcome.outcome is Outcome.RESOLVED_BY_VENDOR and "resolved by vendor-desk" in outcome.explanation

        second = await open_incident(client, task_queue, _device(2), policy)
        await state_in(second, Phase.AWAITING_VENDOR)
        closing = fake.hold("notify_step")  # the closing notice keeps the aborted incident running
        await second.execute_update(WF.abort, AbortRequest(by="bob", reason="device pulled for analysis"))
        assert "already aborted by bob" in await rejected(second, WF.abort, AbortRequest(by="eve", reason="again"))
        closing.set()
        aborted = await outcome_of(env, second)
        state = await second.query(WF.get_state)
    assert aborted.outcome is Outcome.ABORTED and aborted.explanation == "aborted by bob: device pulled for analysis"
    assert state.phase is Phase.CLOSED
    assert [t.step for t in state.timeline][:2] == ["detect", "classify"]
    assert any(t.step == "operator" and "abort requested by bob" in t.message for t in state.timeline)
