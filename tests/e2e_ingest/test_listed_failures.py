"""A failure a cluster source lists (a first start, a relist, a new leader) is not reopened when the device's
last, closed incident already saw the same state (``workers/ingest/handled.py``), and only then.

The Temporal dev server, no worker: an incident run opens with the failure's signal and is terminated (closed,
as a quarantined or aborted incident is), so its history is the record a new ingest replica reads. Each
Deliverer is new, as a new replica's is: nothing is remembered in memory.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, PodKey
from podmedic.domain.policy_file import load_policy
from tests.helpers import assert_eventually
from workers.ingest.delivery import Deliverer

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _failure(device: DeviceRef, code: int, pod_uid: str) -> DeviceHealthEvent:
    # As the pod-status source reports it: its event id carries the pod's resourceVersion, which a later
    # list sees changed, so only the state (health, reason, code, pod) can tell that it is the same failure.
    return DeviceHealthEvent(device=device, health=Health.UNHEALTHY, node=device.pool,
                             reason="allocatedResourcesStatus", code=code, message=f"XID {code}", source="pod-status",
                             observed_at=dt.datetime.now(dt.UTC),
                             event_id=f"pod-status/{pod_uid}/{device.resource_id}/Unhealthy@{uuid.uuid4().hex[:6]}",
                             pod=PodKey(namespace="default", name="train-0", uid=pod_uid))


async def _runs(client: Client, device: DeviceRef) -> list[str]:
    return [w.run_id async for w in client.list_workflows(f'WorkflowId = "{device.workflow_id}"')]


async def test_a_listed_failure_the_closed_incident_saw_opens_nothing_and_another_opens(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = dev_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool=f"node-{uuid.uuid4().hex[:6]}", device="gpu-0")
    policies = load_policy(None)
    first = await Deliverer(client, policies, task_queue).deliver(_failure(device, 79, "uid-1"))
    assert first.run_id and not first.deduplicated
    await client.get_workflow_handle(device.workflow_id).terminate("closed, the device still failing")

    again = await Deliverer(client, policies, task_queue).deliver(_failure(device, 79, "uid-1"), listed=True)
    assert again.deduplicated and again.run_id == first.run_id, again
    assert "not reopened" in again.note

    other_pod = await Deliverer(client, policies, task_queue).deliver(_failure(device, 79, "uid-2"), listed=True)
    assert not other_pod.deduplicated and other_pod.run_id not in (None, first.run_id), \
        "the same failure under a new pod is a new state: it opens"
    await client.get_workflow_handle(device.workflow_id).terminate("test over")

    live = await Deliverer(client, policies, task_queue).deliver(_failure(device, 79, "uid-1"))
    assert not live.deduplicated and live.run_id not in (first.run_id, other_pod.run_id), \
        "a watched change is news: only what a source listed is checked"
    await client.get_workflow_handle(device.workflow_id).terminate("test over")

    async def three() -> None:  # visibility is written after the fact
        assert len(await _runs(client, device)) == 3

    await assert_eventually(three, timeout=10)
