"""An incident names its policy by digest: a small Input in the Temporal UI, the same policy in force.

The ingest records each driver policy as a ``PodmedicPolicy`` workflow before opening an incident
(``podmedic/ingest/policy_records.py``); the incident's first task loads it (``activities/policy.py``).
Time-skipping server, fake cluster activities, the real record workflow and loader.
"""

from __future__ import annotations

import json

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import DeviceRef, IncidentInput, Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.policy_ref import PolicyRef, ref_of
from podmedic.ingest.delivery import deliver_event
from tests.helpers import assert_eventually
from tests.workflow.fakes import FakeCluster, event, incident_worker
from workflows import describe
from workflows.incident import DeviceIncidentWorkflow
from workflows.policy_record import PolicyRecordWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

ACTING = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
""")
DRY_RUN = parse_policy("""
drivers:
  default:
    dry_run: true
""")
DEVICE_A = DeviceRef(driver="gpu.nvidia.com", pool="node-0100", device="gpu-0")
DEVICE_B = DeviceRef(driver="gpu.nvidia.com", pool="node-0100", device="gpu-1")


async def _outcome(client: Client, device: DeviceRef) -> IncidentOutcome:
    return await client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id).result()


async def test_the_input_names_the_policy_and_the_incident_runs_under_it(
        time_skipping_env: WorkflowEnvironment, task_queue: str) -> None:
    client = time_skipping_env.client
    fake = FakeCluster()
    async with incident_worker(client, task_queue, [DeviceIncidentWorkflow], fake.activities()):
        # Two policies at once, as when the file changes under a running incident: each keeps its own.
        await deliver_event(client, event(device=DEVICE_A, event_id="a1"), DRY_RUN, task_queue=task_queue,
                            search_attributes=False)
        await deliver_event(client, event(device=DEVICE_B, event_id="b1"), ACTING, task_queue=task_queue,
                            search_attributes=False)
        dry, acted = await _outcome(client, DEVICE_A), await _outcome(client, DEVICE_B)
    assert dry.outcome is Outcome.DRY_RUN, dry.explanation
    assert acted.outcome is Outcome.RECOVERED_IN_PLACE, acted.explanation
    assert fake.tainted == {DEVICE_B.resource_id}, "the dry-run policy's incident changed nothing"

    history = await client.get_workflow_handle(DEVICE_A.workflow_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    raw = started.input.payloads[0].data
    given = json.loads(raw)
    expected = ref_of(DRY_RUN.for_driver("gpu.nvidia.com"))
    assert given["policy_ref"] == expected.model_dump(mode="json") and given["policy"] is None
    inlined = IncidentInput(device=DEVICE_A, policy=DRY_RUN.for_driver("gpu.nvidia.com")).model_dump_json()
    # The inlined policy was every field of the driver's entry (about 8 KB); a reference is a few lines.
    assert len(raw) < 600 < 5 * len(raw) < len(inlined), (len(raw), len(inlined))
    # The UI's Details pane names it the same way (the time-skipping server keeps no user metadata).
    details = describe.static_details(event(device=DEVICE_A), DRY_RUN.for_driver("gpu.nvidia.com"), expected)
    assert f"Policy in force ({expected.short})" in details


async def test_an_incident_waits_for_a_missing_record_and_refuses_a_wrong_one(
        time_skipping_env: WorkflowEnvironment, task_queue: str) -> None:
    client = time_skipping_env.client
    acting = ACTING.for_driver("gpu.nvidia.com")
    policy = acting.model_copy(update={"close": acting.close.model_copy(update={"anti_flap_s": 6.0})})
    ref = ref_of(policy)  # a policy no other test records on this (shared) server
    fake = FakeCluster()
    async with incident_worker(client, task_queue, [DeviceIncidentWorkflow], fake.activities()):
        # Opened before its policy was recorded (the record expired, say): it waits, acting on nothing.
        handle = await client.start_workflow(
            DeviceIncidentWorkflow.run, IncidentInput(device=DEVICE_A, policy_ref=ref, search_attributes=False),
            id=DEVICE_A.workflow_id, task_queue=task_queue, start_signal="health_event",
            start_signal_args=[event(device=DEVICE_A, event_id="a1")])

        async def load_failed() -> None:
            pending = (await handle.describe()).raw_description.pending_activities
            assert any(a.activity_type.name == "load_policy" and a.attempt >= 2 for a in pending), pending
        await assert_eventually(load_failed)
        assert fake.calls["taint_device"] == 0 and fake.calls["discover_device"] == 0
        await client.start_workflow(PolicyRecordWorkflow.run, policy, id=ref.record_id, task_queue=task_queue)
        assert (await handle.result()).outcome is Outcome.RECOVERED_IN_PLACE

        # A reference whose record (found by the digest's first 16 digits) holds other content: refused.
        wrong = PolicyRef(driver=ref.driver, version=ref.version, digest=ref.digest[:-8] + "00000000")
        assert wrong.record_id == ref.record_id and wrong.digest != ref.digest
        bad = await client.start_workflow(
            DeviceIncidentWorkflow.run, IncidentInput(device=DEVICE_B, policy_ref=wrong, search_attributes=False),
            id=DEVICE_B.workflow_id, task_queue=task_queue, start_signal="health_event",
            start_signal_args=[event(device=DEVICE_B, event_id="b1")])
        failed = await bad.result()
    assert failed.outcome is Outcome.FAILED and ref.digest in failed.explanation, failed.explanation
    assert (await bad.describe()).status is WorkflowExecutionStatus.COMPLETED
