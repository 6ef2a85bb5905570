"""A report that does not say what failed waits for one that does (``detection.corroborate_s``).

Why: the kubelet writes a device's health into pod status with ``message`` only when the driver
sends one and the ResourceHealthStatusMessage gate is on (ResourceHealth.message, k8s.io/api
core/v1 types.go); NVIDIA's XID reaches podmedic through the node agent (NVML), a DCGM alert or
a slice taint instead. Time-skipping server, fake cluster activities under the real names.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from podmedic.domain.incident import IncidentOutcome, Phase
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, FailureMode, Health, Permanence
from podmedic.domain.policy_file import parse_policy
from tests.helpers import assert_eventually
from tests.workflow.fakes import FakeCluster, event, incident_worker
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 600, poll_s: 5}
    classification: {unknown_code_permanence: transient}
  gpu.nvidia.com:
    detection: {corroborate_s: 30}
    classification: {codes: {permanent: [79]}}
""")


def _bare(device: DeviceRef) -> DeviceHealthEvent:
    """What pod status gives when the driver sends no message: Unhealthy, nothing more."""
    return event(Health.UNHEALTHY, device=device, event_id="pod").model_copy(
        update={"reason": "allocatedResourcesStatus", "source": "pod-status"})


def _xid(device: DeviceRef, code: int) -> DeviceHealthEvent:
    return event(Health.UNHEALTHY, code=code, device=device, event_id=f"xid-{code}").model_copy(
        update={"source": "podmedic-agent/node", "message": f"XID {code}"})


async def _send(client: Client, tq: str, ev: DeviceHealthEvent) -> None:
    await deliver_event(client, ev, POLICY, task_queue=tq, search_attributes=False)


def _worker(client: Client, tq: str, fake: FakeCluster) -> Worker:
    return incident_worker(client, tq, [DeviceIncidentWorkflow], fake.activities())


async def _outcome(client: Client, device: DeviceRef) -> IncidentOutcome:
    return await client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id).result()


async def test_a_bare_unhealthy_is_classified_by_the_agents_xid_that_follows(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    client = time_skipping_env.client
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0300", device="gpu-2")
    fake = FakeCluster()
    fake.pods = []
    fake.health = Health.UNHEALTHY
    await _send(client, task_queue, _bare(device))
    async with _worker(client, task_queue, fake):
        handle = client.get_workflow_handle(device.workflow_id)

        async def waiting() -> None:
            state = await handle.query(DeviceIncidentWorkflow.get_state)
            assert state.phase is Phase.WAITING_GRACE and "without saying what failed" in state.doing

        await assert_eventually(waiting, timeout=20)
        assert fake.calls["discover_device"] == 0  # nothing acts on a report that is still being corroborated
        await _send(client, task_queue, _xid(device, 79))
        await time_skipping_env.sleep(timedelta(seconds=700))
        outcome = await _outcome(client, device)
    assert outcome.failure_mode is FailureMode.DEVICE_FAILED and outcome.permanence is Permanence.PERMANENT
    assert "code 79 is a permanent device failure" in " ".join(t.message for t in outcome.timeline)
    assert any(t.message.startswith("classifying by podmedic-agent/node") for t in outcome.timeline)
    assert "NoExecute" in fake.taint_effects


async def _bare_alone(env: WorkflowEnvironment, task_queue: str, device: DeviceRef) -> tuple[IncidentOutcome, str]:
    """Only the bare report ever arrives: the outcome and its timeline as one text."""
    await _send(env.client, task_queue, _bare(device))
    async with _worker(env.client, task_queue, FakeCluster()):
        await env.sleep(timedelta(seconds=700))
        outcome = await _outcome(env.client, device)
    return outcome, " ".join(t.message for t in outcome.timeline)


async def test_without_a_second_source_the_bare_report_is_classified_as_it_is(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0301", device="gpu-0")
    outcome, text = await _bare_alone(time_skipping_env, task_queue, device)
    assert "no other source named the failure within 30s" in text
    assert outcome.permanence is Permanence.TRANSIENT and "no code" in text


async def test_a_driver_without_corroboration_classifies_at_once(
    time_skipping_env: WorkflowEnvironment, task_queue: str
) -> None:
    device = DeviceRef(driver="gpu.amd.com", pool="node-0302", device="gpu-0")
    _, text = await _bare_alone(time_skipping_env, task_queue, device)
    assert "waiting up to" not in text and "no code" in text
