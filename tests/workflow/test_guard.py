"""The fleet guard on the time-skipping server: limits throttle, operators override, storms trip
and resume (by an operator and by clear time), disabled means unchanged, dry run changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.fleet_guard import ask
from podmedic.domain.fleet_guard.messages import FleetSize, PermitRequest, ResumeRequest
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.incident import AbortRequest, ApprovalRequest, Phase
from podmedic.domain.models import DeviceRef, Health, Outcome
from podmedic.domain.node import NodeIncidentState, node_workflow_id
from podmedic.domain.policy_file import PolicySet, parse_policy
from tests.helpers import assert_eventually
from tests.workflow.fakes import FakeCluster
from tests.workflow.guard_helpers import FleetOf, guard_handle, guard_status, guard_worker
from tests.workflow.operator_helpers import Handle, open_incident, outcome_of, own_time_skipping_env, state_in
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.fleet.guard import FleetGuardWorkflow
from workflows.fleet.incident import FleetIncidentWorkflow
from workflows.node.incident import NodeIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

DRIVER = "gpu.nvidia.com"
BASE = """
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 3600, poll_s: 30}
    classification: {codes: {permanent: [79]}}
"""


def policy(guard: str) -> PolicySet:
    return parse_policy(f"guard: {guard}\n{BASE}")


def fleet(client: object, devices: int = 100) -> FleetOf:
    sizes = FleetSize(drivers={DRIVER: devices}, pools={f"{DRIVER}/node-{n}": 8 for n in range(devices // 8 + 1)})
    return FleetOf(client, sizes)  # type: ignore[arg-type]


def device(node: int, n: int) -> DeviceRef:
    return DeviceRef(driver=DRIVER, pool=f"node-{node}", device=f"gpu-{n}")


@pytest_asyncio.fixture(loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh server per test: the guard is one workflow per namespace."""
    async for server in own_time_skipping_env():
        yield server


async def test_over_the_limit_an_incident_is_throttled_until_a_permit_frees(env: WorkflowEnvironment,
                                                                             task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    rules = policy("{max_devices_tainted: 1, retry_s: 600}")
    async with guard_worker(client, task_queue, fake, fleet(client)):
        first = await open_incident(client, task_queue, device(0, 0), rules)
        await state_in(first, Phase.AWAITING_VENDOR)  # tainted, rescheduled, ticketed: holds its permit
        second = await open_incident(client, task_queue, device(1, 0), rules)
        held = await state_in(second, Phase.THROTTLED)
        assert "devices_tainted" in held.doing and "1 devices under remediation; limit 1" in held.doing
        assert fake.tainted == {first.id.removeprefix("device/")}
        status = await guard_status(client, permits=1, waiting=1)
        assert [p.incident_id for p in status.permits] == [first.id] and status.waiting == [second.id]
        assert status.waiting_summary.startswith(f"1 incident(s) wait for a permit, the oldest since "
                                                 f"{status.waiting_since[second.id]:%Y-%m-%d %H:%M:%S}Z ({second.id})")
        await first.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="ops", reason="test frees it"))
        await outcome_of(env, first)
        state = await state_in(second, Phase.AWAITING_VENDOR)  # woken by the release, not by its 600 s retry
        assert (await guard_status(client, permits=1)).permits[0].incident_id == second.id
    # The first was fenced and raised; the second had no fence (held) and took its taint once allowed.
    assert fake.taint_effects == ["NoSchedule", "NoExecute", "NoExecute"]
    assert any(t.message.startswith("no fence: the fleet guard holds taints now") for t in state.timeline)
    lines = [t.message for t in state.timeline if t.step == "guard"]
    assert lines[0].startswith("taint held by the fleet guard (devices_tainted)")
    assert lines[-1].startswith("taint allowed by the fleet guard")


async def _holder_and_waiter(client: Client, task_queue: str, rules: PolicySet) -> tuple[Handle, Handle]:
    """The first incident holds the only permit (waiting for its vendor); the second waits for it."""
    first = await open_incident(client, task_queue, device(0, 0), rules)
    await state_in(first, Phase.AWAITING_VENDOR)
    second = await open_incident(client, task_queue, device(1, 0), rules)
    await state_in(second, Phase.THROTTLED)
    return first, second


async def test_a_terminated_holders_permit_is_reclaimed_and_a_running_holders_is_not(env: WorkflowEnvironment,
                                                                                     task_queue: str) -> None:
    # Terminate (the Temporal UI's button, `temporal workflow terminate`) runs none of the incident's code,
    # so nothing sends the guard's release: the guard learns it from the run's status (describe, as
    # Temporal reports a terminated execution) when it checks its holders.
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    rules = policy("{max_devices_tainted: 1, retry_s: 600, reclaim_s: 30}")
    async with guard_worker(client, task_queue, fake, fleet(client)):
        first, second = await _holder_and_waiter(client, task_queue, rules)
        await env.sleep(90)  # three checks of the holders: the first still runs, its permit stays
        status = await guard_status(client, permits=1, waiting=1)
        assert [p.incident_id for p in status.permits] == [first.id]
        await first.terminate(reason="operator pressed Terminate")
        for _ in range(10):
            if (await second.query(DeviceIncidentWorkflow.get_state)).phase is not Phase.THROTTLED:
                break
            await env.sleep(30)
        await state_in(second, Phase.AWAITING_VENDOR)
        status = await guard_status(client, permits=1, waiting=0)
        assert [p.incident_id for p in status.permits] == [second.id]
        assert any(f"freed the permit of {first.id}: its run closed (terminated)" in line for line in status.history)
        assert (await first.describe()).status == WorkflowExecutionStatus.TERMINATED


async def test_a_temporal_cancel_closes_the_incident_as_abort_does(env: WorkflowEnvironment, task_queue: str) -> None:
    # Cancel (the UI's button, `temporal workflow cancel`) reaches the wait the incident is in (here the
    # vendor wait) as a cancellation; the incident then closes as `abort` closes it: outcome aborted, its
    # permit given back at once (the throttled incident proceeds long before a holder check could free
    # it), the pods told.
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    rules = policy("{max_devices_tainted: 1, retry_s: 600, reclaim_s: 3600}")
    async with guard_worker(client, task_queue, fake, fleet(client)):
        first, second = await _holder_and_waiter(client, task_queue, rules)
        await first.cancel()
        outcome = await outcome_of(env, first)
        assert outcome.outcome is Outcome.ABORTED, outcome.explanation
        assert outcome.explanation.startswith("canceled from Temporal") and "in phase AwaitingVendor" in \
            outcome.explanation, outcome.explanation
        assert [(d.decision, d.by) for d in outcome.decisions][-1] == ("canceled", "temporal")
        assert any(n.step == "closed" and "incident closed: aborted" in n.message for n in fake.notices)
        await state_in(second, Phase.AWAITING_VENDOR)  # woken by the release, not by a holder check
        status = await guard_status(client, permits=1)
        assert [p.incident_id for p in status.permits] == [second.id]
        assert not any("freed the permit" in line for line in status.history)


async def test_ask_operator_waits_at_a_gate_and_approval_goes_past_the_limit(env: WorkflowEnvironment,
                                                                             task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    rules = policy("{max_devices_tainted: 1, on_limit: ask_operator}")
    async with guard_worker(client, task_queue, fake, fleet(client)):
        first = await open_incident(client, task_queue, device(0, 0), rules)
        await state_in(first, Phase.AWAITING_VENDOR)
        second = await open_incident(client, task_queue, device(1, 0), rules)
        state = await state_in(second, Phase.AWAITING_APPROVAL)
        assert state.pending_approval is not None and state.pending_approval.gate == "fleet_guard"
        assert state.pending_approval.step == "taint" and "devices_tainted" in state.pending_approval.action
        assert fake.tainted == {first.id.removeprefix("device/")}
        await second.execute_update(DeviceIncidentWorkflow.approve, ApprovalRequest(step="taint", by="dana"))
        await state_in(second, Phase.AWAITING_VENDOR)
        status = await guard_status(client, permits=2)
    assert len(fake.tainted) == 2
    assert {p.incident_id: p.override_by for p in status.permits} == {first.id: None, second.id: "dana"}


async def _storm(env: WorkflowEnvironment, task_queue: str, fake: FakeCluster, rules: PolicySet,
                 devices: int) -> list[str]:
    """Fail ``devices`` devices of a 20-device fleet; the incidents' ids."""
    ids = []
    for n in range(devices):
        handle = await open_incident(env.client, task_queue, device(n, 0), rules)
        ids.append(handle.id)
    return ids


STORM = "{storm: {share: 0.3, window_s: 300, min_devices: 3, clear_s: 600}, max_driver_share: 1, retry_s: 3600}"


async def test_a_storm_trips_pauses_everything_opens_a_fleet_incident_and_an_operator_resumes(
        env: WorkflowEnvironment, task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    rules = policy(STORM)
    async with guard_worker(client, task_queue, fake, fleet(client, devices=20)):
        ids = await _storm(env, task_queue, fake, rules, 6)  # 6 of 20 = 30%
        status = await guard_status(client, expect="tripped", waiting=None)
        storm = status.storm
        assert storm is not None and storm.unhealthy == 6 and storm.fleet == 20 and storm.driver == DRIVER
        for incident in ids:
            await state_in(client.get_workflow_handle_for(DeviceIncidentWorkflow.run, incident), Phase.THROTTLED)
        before = fake.calls["taint_device"] + fake.calls["reschedule_same_node"]
        assert len(fake.tainted) < 6
        record = client.get_workflow_handle_for(FleetIncidentWorkflow.run, storm.fleet_incident)
        seen = await record.query(FleetIncidentWorkflow.get_state)
        assert seen.open and "6 of 20 gpu.nvidia.com devices (30%)" in seen.storm.summary
        # The guard is asked at the fence, before discovery: the nodes are the events' (device(n, 0)).
        assert sorted(seen.storm.nodes) == [f"node-{n}" for n in range(6)]
        await env.sleep(600)  # no disruptive step while tripped (calm only from 300 s, resume at 900 s)
        assert fake.calls["taint_device"] + fake.calls["reschedule_same_node"] == before
        resumed = await guard_handle(client).execute_update(FleetGuardWorkflow.resume,
                                                            ResumeRequest(by="erin", reason="PDU fixed"))
        assert resumed.state == "ok"
        assert "resumed by erin: PDU fixed" in await record.result()
        for incident in ids:
            await state_in(client.get_workflow_handle_for(DeviceIncidentWorkflow.run, incident),
                           Phase.AWAITING_VENDOR)
    assert len(fake.tainted) == 6


async def test_faults_the_workload_caused_are_no_storm(env: WorkflowEnvironment, task_queue: str) -> None:
    # Six devices of twenty (30 %) fail, as in the storm above, but with XID 31: the workload's own MMU
    # fault (container_code in the table). Each holds a permit while it is remediated; none is a sign of
    # a storm, so the guard stays open and every incident acts.
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    rules = parse_policy(f"guard: {STORM}\n{BASE.replace('permanent: [79]', 'permanent: [79], container_code: [31]')}")
    async with guard_worker(client, task_queue, fake, fleet(client, devices=20)):
        handles = [await open_incident(client, task_queue, device(n, 0), rules, code=31) for n in range(6)]
        for handle in handles:
            state = await assert_eventually(lambda h=handle: _tainted(h), timeout=30)
            assert state.failure_mode is not None and state.failure_mode.value == "container_code"
        status = await guard_status(client, expect="ok")
        assert status.storm is None and len(status.permits) == 6


async def _tainted(handle: object) -> object:
    state = await handle.query(DeviceIncidentWorkflow.get_state)  # type: ignore[attr-defined]
    assert state.taint_rule is not None, state.phase
    return state


async def test_a_storm_resumes_by_itself_once_calm_for_clear_s(env: WorkflowEnvironment, task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    async with guard_worker(client, task_queue, fake, fleet(client, devices=20)):
        await _storm(env, task_queue, fake, policy(STORM), 6)
        storm = (await guard_status(client, expect="tripped")).storm
        assert storm is not None
        record = client.get_workflow_handle_for(FleetIncidentWorkflow.run, storm.fleet_incident)
        await env.sleep(200)
        assert (await record.describe()).status == WorkflowExecutionStatus.RUNNING  # not calm yet
        for _ in range(20):
            if (await record.describe()).status != WorkflowExecutionStatus.RUNNING:
                break
            await env.sleep(120)
        assert "storm cleared" in await record.result()
        await guard_status(client, expect="ok")


async def test_a_node_quarantine_waits_for_the_guard_during_a_storm(env: WorkflowEnvironment,
                                                                    task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    rules = policy(STORM)
    async with guard_worker(client, task_queue, fake, fleet(client, devices=20)):
        await _storm(env, task_queue, fake, rules, 6)
        await guard_status(client, expect="tripped")
        for n in range(3):  # three devices of one node: a node incident
            await open_incident(client, task_queue, device(300, n), rules)
        watch = client.get_workflow_handle_for(NodeIncidentWorkflow.run, node_workflow_id("node-300"))

        async def phase(expected: str) -> NodeIncidentState:
            try:
                state = await watch.query(NodeIncidentWorkflow.get_state)
            except RPCError as err:
                raise AssertionError(str(err)) from err
            assert state.phase == expected, state.phase
            return state

        held = await assert_eventually(lambda: phase("Throttled"))
        assert "node_quarantine waits for the fleet guard (storm)" in held.doing and fake.calls["quarantine_node"] == 0
        await guard_handle(client).execute_update(FleetGuardWorkflow.resume, ResumeRequest(by="erin", reason="ok"))
        done = await assert_eventually(lambda: phase("Quarantined"))
        status = await guard_status(client)
    assert fake.calls["quarantine_node"] == 1 and done.quarantined
    assert watch.id in [p.incident_id for p in status.permits]
    assert watch.id not in (status.storm.devices if status.storm else [])


async def test_guard_disabled_changes_nothing(env: WorkflowEnvironment, task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    guard = fleet(client)
    async with guard_worker(client, task_queue, fake, guard):
        handle = await open_incident(client, task_queue, device(0, 0), policy("{enabled: false}"), code=31)
        outcome = await outcome_of(env, handle)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE and guard.asks == 0
    assert not [t for t in outcome.timeline if t.step == "guard"]


async def test_dry_run_records_every_decision_and_calls_nothing_that_writes(env: WorkflowEnvironment,
                                                                            task_queue: str) -> None:
    client, fake = env.client, FakeCluster()
    fake.health = Health.UNHEALTHY
    rules = parse_policy(f"guard: {{max_devices_tainted: 5}}\n{BASE}\n  {DRIVER}: {{dry_run: true}}\n")
    async with guard_worker(client, task_queue, fake, fleet(client)):
        handle = await open_incident(client, task_queue, device(0, 0), rules)
        outcome = await outcome_of(env, handle)
        assert (await guard_status(client, permits=0)).permits == []  # probes hold nothing
    writes = ("request_checkpoints", "taint_device", "remove_taint", "restart_in_place", "reschedule_same_node",
              "reschedule_any_node", "file_ticket", "notify_step", "report_to_node", "quarantine_node")
    assert {w: fake.calls[w] for w in writes if fake.calls[w]} == {}
    assert outcome.outcome is Outcome.DRY_RUN
    lines = [t.message for t in outcome.timeline]
    print("\n".join(f"{t.step:<10} {t.message}" for t in outcome.timeline))  # docs/guard.md shows these
    assert any(m.startswith("dry-run: would taint gpu.nvidia.com/node-0/gpu-0 NoExecute") for m in lines)
    assert any(m.startswith("dry-run: the fleet guard would allow taint") for m in lines)
    assert any(m.startswith("dry-run: would evict default/train-abcde") for m in lines)
    assert any(m.startswith("dry-run: would file a vendor ticket (webhook)") for m in lines)


async def test_a_workers_concurrent_asks_go_in_few_updates_and_are_answered_in_order(
        env: WorkflowEnvironment, task_queue: str) -> None:
    """40 incidents of one worker ask at once (a storm's fences): the guard gets them in a handful of
    ``ask_many`` updates, not 40, and each answer is its own incident's: the first 10 hold permits
    (max_devices_tainted 10), the rest are held by that limit."""
    client = env.client
    rules = GuardPolicy(max_devices_tainted=10, max_nodes_disrupted=100, max_driver_share=1.0, max_pool_share=1.0)
    asks = [PermitRequest(incident_id=f"device/{DRIVER}/node-{n}/gpu-0", device=device(n, 0), node=f"node-{n}",
                          step="taint", policy=rules, search_attributes=False) for n in range(40)]
    async with guard_worker(client, task_queue, FakeCluster(), fleet(client, devices=1000)):
        answers = await asyncio.gather(*(ask(client, task_queue, req) for req in asks))
        history = await guard_handle(client).fetch_history()
        status = await guard_status(client, permits=10)
    updates = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert 1 <= len(updates) <= 2, len(updates)
    granted = [req.incident_id for req, answer in zip(asks, answers, strict=True) if answer.granted]
    assert len(granted) == 10, answers
    assert all(answer.limit == "devices_tainted" for answer in answers if not answer.granted), answers
    assert sorted(p.incident_id for p in status.permits) == sorted(granted)


async def test_the_guard_an_ask_starts_runs_at_the_urgent_task_priority(env: WorkflowEnvironment,
                                                                         task_queue: str) -> None:
    """In a storm every incident's ask waits on the guard's workflow tasks, which must not queue behind
    the storm's new incidents (default priority 3; Temporal dispatches a backlog lowest key first)."""
    client = env.client
    req = PermitRequest(incident_id=f"device/{DRIVER}/node-0/gpu-0", device=device(0, 0), node="node-0",
                        step="taint", policy=GuardPolicy(), search_attributes=False)
    async with guard_worker(client, task_queue, FakeCluster(), fleet(client)):
        assert (await ask(client, task_queue, req)).granted
        history = await guard_handle(client).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.priority.priority_key == 1, started.priority
