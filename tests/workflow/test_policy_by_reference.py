"""An incident names its policy by digest: a small Input in the Temporal UI, the same policy in force.

The ingest puts the policy in the start's memo and its digest in the input (``podmedic/domain/policy_ref.py``);
the workflow reads and checks it (``workflows/policy_memo.py``). Time-skipping server, fake activities.
"""

from __future__ import annotations

import json

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain import describe
from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import DeviceRef, IncidentInput, Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.policy_ref import POLICY_MEMO, pack, ref_of, unpack
from tests.workflow.fakes import FakeCluster, event, incident_worker
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow

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
    assert given["policy_ref"] == expected.model_dump(mode="json") and "policy" not in given
    inlined = DRY_RUN.for_driver("gpu.nvidia.com").model_dump_json()
    # The policy inlined would be every field of the driver's entry (about 8 KB); a reference is a few lines.
    assert len(raw) < 600 < 5 * len(raw) < len(inlined), (len(raw), len(inlined))
    carried = started.memo.fields[POLICY_MEMO].data
    assert unpack(carried) == DRY_RUN.for_driver("gpu.nvidia.com")
    assert len(carried) < 2048, "under the memo size at which Temporal warns"
    # The UI's Details pane names it the same way (the time-skipping server keeps no user metadata).
    details = describe.static_details(event(device=DEVICE_A), DRY_RUN.for_driver("gpu.nvidia.com"), expected)
    assert f"Policy in force ({expected.short})" in details


async def test_a_memo_that_is_not_the_named_policy_is_refused(
        time_skipping_env: WorkflowEnvironment, task_queue: str) -> None:
    client = time_skipping_env.client
    policy = ACTING.for_driver("gpu.nvidia.com")
    ref = ref_of(policy)
    other = policy.model_copy(update={"dry_run": True})
    fake = FakeCluster()
    async with incident_worker(client, task_queue, [DeviceIncidentWorkflow], fake.activities()):
        outcomes = []
        for device, memo in ((DEVICE_A, {POLICY_MEMO: pack(other)}), (DEVICE_B, {})):
            handle = await client.start_workflow(
                DeviceIncidentWorkflow.run, IncidentInput(device=device, policy_ref=ref, search_attributes=False),
                id=device.workflow_id, task_queue=task_queue, start_signal="health_event", memo=memo,
                start_signal_args=[event(device=device, event_id=f"{device.device}-1")])
            outcomes.append(await handle.result())
    wrong, missing = outcomes
    assert wrong.outcome is Outcome.FAILED and "not the digest the input names" in wrong.explanation, wrong
    assert missing.outcome is Outcome.FAILED and "no memo" in missing.explanation, missing
    assert fake.calls["taint_device"] == 0 and fake.calls["discover_device"] == 0, "it acted on nothing"
