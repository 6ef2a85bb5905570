"""Workflow logic on the time-skipping server, with fake activities under the real names."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from benchmarks.fleet import local_activity_type
from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import DeviceRef, Health, Outcome
from podmedic.domain.policy_file import PolicySet, parse_policy
from tests.workflow.fakes import DEVICE, POD, FakeCluster, event, incident_worker
from tests.workflow.operator_helpers import outcome_of
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 60, poll_s: 5}
  gpu.nvidia.com:
    steps:
      taint: {retry: {initial_interval_s: 1, max_interval_s: 1, max_attempts: 2}}
      discover: {start_to_close_s: 1, retry: {max_attempts: 1}}
    classification: {codes: {permanent: [79]}}
  gpu.amd.com:
    steps:
      taint: {retry: {initial_interval_s: 1, max_interval_s: 5, max_attempts: 0}}
      discover: {start_to_close_s: 30}
""")
AMD = DeviceRef(driver="gpu.amd.com", pool="node-0001", device="gpu-3")


def _worker(client: Client, task_queue: str, fake: FakeCluster) -> Worker:
    return incident_worker(client, task_queue, [DeviceIncidentWorkflow], fake.activities())


async def _open(client: Client, tq: str, device: DeviceRef = DEVICE, code: int | None = None,
                event_id: str = "e1", policy: PolicySet = POLICY) -> str:
    run_id = await deliver_event(client, event(code=code, device=device, event_id=event_id), policy,
                                 task_queue=tq, search_attributes=False)
    assert run_id
    return run_id


async def _outcome(client: Client, device: DeviceRef = DEVICE) -> IncidentOutcome:
    handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id)
    return await handle.result()


async def test_retry_limit_comes_from_the_driver_policy(time_skipping_env: WorkflowEnvironment,
                                                        task_queue: str) -> None:
    client = time_skipping_env.client
    fake = FakeCluster()
    fake.taint_error = "ServerError"
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue)
        outcome = await _outcome(client)
    assert outcome.outcome is Outcome.FAILED
    assert "step Tainting gave up: ServerError: API unavailable" in outcome.explanation
    assert fake.calls["taint_device"] == 2  # gpu.nvidia.com: max_attempts 2

    fake_amd = FakeCluster()
    fake_amd.taint_error = "ServerError"
    tq = f"{task_queue}-amd"
    async with _worker(client, tq, fake_amd):
        await _open(client, tq, device=AMD)
        await time_skipping_env.sleep(timedelta(minutes=3))
        handle = client.get_workflow_handle(AMD.workflow_id)
        desc = await handle.describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING  # gpu.amd.com: unlimited attempts
        assert fake_amd.calls["taint_device"] > 10
        await handle.terminate("test done")


async def test_non_retryable_error_type_fails_at_once(time_skipping_env: WorkflowEnvironment,
                                                      task_queue: str) -> None:
    client = time_skipping_env.client
    fake = FakeCluster()
    fake.taint_error = "InvalidObject"
    device = DeviceRef(driver="gpu.amd.com", pool="node-0002", device="gpu-1")
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue, device=device)
        outcome = await _outcome(client, device)
    assert outcome.outcome is Outcome.FAILED
    assert fake.calls["taint_device"] == 1  # InvalidObject is non-retryable by default


async def test_start_to_close_timeout_comes_from_the_driver_policy(time_skipping_env: WorkflowEnvironment,
                                                                   task_queue: str) -> None:
    client = time_skipping_env.client
    fake = FakeCluster()
    fake.discover_delay_s = 2.0
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0003", device="gpu-0")
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue, device=device)
        outcome = await _outcome(client, device)
    assert outcome.outcome is Outcome.FAILED
    assert "timed out" in outcome.explanation.lower() or "timeout" in outcome.explanation.lower()

    device_amd = DeviceRef(driver="gpu.amd.com", pool="node-0003", device="gpu-0")
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue, device=device_amd)
        outcome_amd = await _outcome(client, device_amd)
    assert outcome_amd.outcome is Outcome.RECOVERED_IN_PLACE


async def test_duplicate_events_join_one_incident(time_skipping_env: WorkflowEnvironment, task_queue: str) -> None:
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0004", device="gpu-2")
    runs = {await _open(client, task_queue, device=device, event_id=eid) for eid in ("a", "a", "b", "a")}
    assert len(runs) == 1
    fake = FakeCluster()
    async with _worker(client, task_queue, fake):
        outcome = await _outcome(client, device)
        state = await client.get_workflow_handle(device.workflow_id).query(DeviceIncidentWorkflow.get_state)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE
    assert state.events_seen == 2
    assert fake.calls["discover_device"] == 1
    assert fake.calls["taint_device"] == 1


async def test_transient_path_and_replay(time_skipping_env: WorkflowEnvironment, task_queue: str) -> None:
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0005", device="gpu-0")
    fake = FakeCluster()
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue, device=device)
        outcome = await _outcome(client, device)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE
    # NoSchedule evicts nothing: the device is fenced before the workload is asked to save.
    assert outcome.steps == ["detect", "taint", "checkpoint", "recover", "close"]
    assert fake.order.index("taint_device") < fake.order.index("request_checkpoints")
    assert fake.taint_effects == ["NoSchedule"]
    assert outcome.checkpoint_ids and outcome.checkpoint_ids[0].startswith("ckpt-")
    assert outcome.taint_removed and fake.calls["remove_taint"] == 1
    history = await client.get_workflow_handle(device.workflow_id).fetch_history()
    priorities = {e.activity_task_scheduled_event_attributes.activity_type.name:
                  e.activity_task_scheduled_event_attributes.priority.priority_key
                  for e in history.events if e.HasField("activity_task_scheduled_event_attributes")}
    # Before the taint first (a storm's backlog dispatches it ahead), pod Events last.
    assert {k: priorities[k] for k in ("report_to_node", "discover_device", "request_checkpoints",
                                       "notify_step")} == {"report_to_node": 1, "discover_device": 1,
                                                           "request_checkpoints": 4, "notify_step": 5}, priorities
    # The fence is a local activity in the task that opened the incident: no task queue before it.
    assert "taint_device" not in priorities
    assert [t for e in history.events if (t := local_activity_type(e))] == ["taint_device"]
    kinds = [e.event_type for e in history.events]
    first_task = kinds.index(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    next_task = kinds.index(EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, first_task)
    assert [t for e in history.events[first_task:next_task] if (t := local_activity_type(e))] == ["taint_device"]
    await Replayer(workflows=[DeviceIncidentWorkflow], data_converter=client.data_converter).replay_workflow(history)


async def _permanent(client: Client, task_queue: str, device: DeviceRef, fake: FakeCluster) -> IncidentOutcome:
    """An XID 79 (permanent) incident on ``device`` whose health stays bad, run to its outcome."""
    fake.health = Health.UNHEALTHY
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue, device=device, code=79)
        return await _outcome(client, device)


async def test_permanent_failure_skips_checkpoint_and_files_one_ticket(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0006", device="gpu-7")
    fake = FakeCluster()
    outcome = await _permanent(time_skipping_env.client, task_queue, device, fake)
    assert outcome.outcome is Outcome.RESOLVED_BY_VENDOR
    assert outcome.steps == ["detect", "taint", "checkpoint", "recover", "ticket", "close"]
    # Fenced before discovery (NoExecute then would evict the pods before they are found), raised after.
    assert fake.taint_effects == ["NoSchedule", "NoExecute"]
    assert fake.order.index("taint_device") < fake.order.index("discover_device")
    assert fake.calls["request_checkpoints"] == 0
    assert fake.calls["restart_in_place"] == 0 and fake.calls["reschedule_same_node"] == 1
    assert fake.calls["file_ticket"] == 1 and outcome.ticket_id == "T-1"
    assert any("skipped" in t.message for t in outcome.timeline if t.step == "checkpoint")


async def test_permanent_failure_checkpoints_the_pods_still_running_before_evicting_them(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    # An HBM3 or NVLink error leaves the process running for a while: what it can still save is
    # work the job would lose back to its last periodic checkpoint. A crashed pod is not asked.
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0008", device="gpu-2")
    fake = FakeCluster()
    live = POD.model_copy(update={"running": True})
    crashed = POD.model_copy(update={"name": "train-crashed", "uid": "uid-2", "running": False})
    fake.pods = [live, crashed]
    outcome = await _permanent(time_skipping_env.client, task_queue, device, fake)
    assert fake.calls["request_checkpoints"] == 1
    assert fake.taint_effects == ["NoSchedule", "NoExecute"]
    checkpointed = fake.order.index("request_checkpoints")
    assert fake.order.index("taint_device") < checkpointed < len(fake.order) - fake.order[::-1].index("taint_device")
    assert outcome.checkpoint == "partial: 1/2 pods"
    lines = [t.message for t in outcome.timeline if t.step == "checkpoint"]
    assert any(m.startswith("train-abcde (annotation): saved") for m in lines), lines
    assert any(m.startswith("train-crashed") and "cannot save" in m for m in lines), lines


async def test_pod_notices_are_written_behind_the_pipeline_in_step_order(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0007", device="gpu-1")
    fake = FakeCluster()
    fake.notice_delay_s = 0.5  # a slow API server for Events: the taint must not wait for them
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue, device=device)
        outcome = await _outcome(client, device)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE
    reasons = [n.reason for n in fake.notices]
    # The fence is named in the opening Event and the checkpoint's notice rides on the restart's
    # (fold-step-notices, workflows/record/pod_notices.py).
    assert f"fenced: DeviceTaintRule {device.object_name} NoSchedule" in fake.notices[0].message
    assert reasons == ["PodmedicIncidentOpened", "PodmedicRestarted", "PodmedicIncidentClosed"]
    assert fake.notices[1].message.startswith("checkpoint before remediation")
    # The taint came before the first notice was written, and the incident closed only after the last.
    assert fake.order.index("taint_device") < fake.order.index("PodmedicIncidentOpened")
    assert fake.order[-1] == "PodmedicIncidentClosed"


def _policy_with(taint: str) -> PolicySet:
    """The test policy with ``taint`` (YAML flow-mapping entries) added to the driver default."""
    return parse_policy(f"""
drivers:
  default:
    close: {{anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}}
    ticket: {{url: "http://tickets.invalid", wait_resolution_s: 60, poll_s: 5}}
    {taint}
""")


async def _gated(env: WorkflowEnvironment, task_queue: str, fake: FakeCluster, gpu: str,
                 policy: str) -> IncidentOutcome:
    """Run one incident on node-0008's ``gpu`` under ``_policy_with(policy)``, through its gates' timers."""
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0008", device=gpu)
    async with _worker(env.client, task_queue, fake):
        await _open(env.client, task_queue, device=device, policy=_policy_with(policy))
        # a gate's timer: time is moved on by hand (see outcome_of)
        return await outcome_of(env, env.client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id))


async def test_an_evicting_taint_fences_first_and_is_raised_after_the_checkpoint(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    fake = FakeCluster()
    outcome = await _gated(time_skipping_env, task_queue, fake, "gpu-1", "taint: {transient: NoExecute}\n"
                           "    approvals: {gates: [{action: taint_no_execute, timeout_s: 60, on_timeout: proceed}]}")
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE
    # NoSchedule at once (ungated, evicts nothing), the checkpoint, then the gated NoExecute.
    assert fake.taint_effects == ["NoSchedule", "NoExecute"]
    assert [o for o in fake.order if not o.startswith("Podmedic")] == [
        "taint_device", "discover_device", "request_checkpoints", "taint_device"]
    notes = [t.message for t in outcome.timeline if t.step in ("taint", "approval")]
    assert notes[0].endswith("(NoSchedule, created)"), notes
    assert any("taint needs approval" in n for n in notes) and "raised to NoExecute after the checkpoint" in notes[-1]


async def test_a_taint_waiting_for_approval_lets_the_checkpoint_go_first(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    fake = FakeCluster()
    outcome = await _gated(time_skipping_env, task_queue, fake, "gpu-2",
                           "approvals: {gates: [{action: taint, timeout_s: 60, on_timeout: proceed}]}")
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE
    assert outcome.steps == ["detect", "checkpoint", "taint", "recover", "close"]
    assert fake.taint_effects == ["NoSchedule"]


async def test_a_checkpoint_step_that_gives_up_does_not_stop_the_remediation(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0008", device="gpu-3")
    policy = _policy_with("steps: {checkpoint: {retry: {initial_interval_s: 1, max_attempts: 3}}}")
    fake = FakeCluster()
    fake.checkpoint_error = "ServerError"
    async with _worker(client, task_queue, fake):
        await _open(client, task_queue, device=device, policy=policy)
        outcome = await _outcome(client, device)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, outcome.explanation
    assert fake.calls["request_checkpoints"] == 3 and fake.calls["restart_in_place"] == 1
    notes = [t.message for t in outcome.timeline if t.step == "checkpoint"]
    assert any("failed" in n and "the checkpoint step gave up: ServerError: API unavailable" in n for n in notes), notes
