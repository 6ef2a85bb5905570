"""An incident's search attributes: the final values operators filter on, written once per workflow task."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from podmedic.domain import search
from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_file import parse_policy
from tests.workflow.fakes import FakeCluster, event, incident_worker
from workers.ingest.starts import deliver_event
from workflows import patches
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 0.2, heal_wait_s: 10, poll_s: 0.2}
    ticket: {url: ""}
""")
DEVICE = DeviceRef(driver="gpu.nvidia.com", pool="node-0042", device="gpu-1")


async def test_attributes_end_with_the_outcome_and_each_task_writes_them_once(dev_env: WorkflowEnvironment,
                                                                            task_queue: str) -> None:
    client = dev_env.client
    fake = FakeCluster()
    async with incident_worker(client, task_queue, [DeviceIncidentWorkflow], fake.activities()):
        await deliver_event(client, event(device=DEVICE, event_id="sa-1"), POLICY, task_queue=task_queue)
        handle = client.get_workflow_handle(DEVICE.workflow_id)
        await handle.result()
    attributes = (await handle.describe()).typed_search_attributes
    assert attributes.get(search.PHASE) == "Closed"
    assert attributes.get(search.OUTCOME) == "recovered_in_place"
    assert attributes.get(search.FAILURE_MODE) == "device_failed"
    assert attributes.get(search.DEVICE) == DEVICE.resource_id
    assert attributes.get(search.PODS)

    history = await handle.fetch_history()
    patch_markers = [e for e in history.events if e.marker_recorded_event_attributes.marker_name == "core_patch"]
    assert len(patch_markers) <= len(patches.PATCHES), "an incident records only its release's live patches"
    per_task: list[list[set[str]]] = []
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            per_task.append([])
        elif e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            keys = set(e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)
            if keys != {"TemporalChangeVersion"}:
                per_task[-1].append(keys)
    # The task that opens the incident goes through several phases (opened, tainting, discovering)
    # and discovery sets five attributes at once: one write per wait, not one per change.
    assert max(len(writes) for writes in per_task) <= 2, per_task
    assert any(len(keys) >= 4 for writes in per_task for keys in writes), per_task
    await Replayer(workflows=[DeviceIncidentWorkflow], data_converter=client.data_converter).replay_workflow(history)
