"""A training job hit by a transient fault loses no more progress than since podmedic's checkpoint."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import pytest

from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, Outcome, PodKey
from podmedic.domain.policy_file import parse_policy
from podmedic_sim.checkpoint_figures import format_loss, progress_loss
from tests.e2e_checkpoint.conftest import Stack, start_job
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

FULL = parse_policy("""
drivers:
  default:
    checkpoint: {timeout_s: 5, poll_s: 0.1}
    recovery:
      transient: [{action: in_place_restart, timeout_s: 10}]
      verify_poll_s: 0.1
    close: {heal_wait_s: 1, anti_flap_s: 0.5, poll_s: 0.2}
    ticket: {backend: none}
  gpu.nvidia.com:
    classification: {codes: {container_code: [31]}}
""")


async def test_transient_fault_loses_only_steps_since_the_requested_checkpoint(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="annotation")
    await asyncio.sleep(0.5)  # some progress before the fault
    driver, pool, device = pod["devices"][0].split("/")
    stack.sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=31,
                                message="XID 31", clears_on_restart=True)
    event = DeviceHealthEvent(device=DeviceRef(driver=driver, pool=pool, device=device), health=Health.UNHEALTHY,
                              node=pod["node"], reason="XidError", code=31, message="XID 31", source="test",
                              observed_at=dt.datetime.now(dt.UTC), event_id=uuid.uuid4().hex,
                              pod=PodKey(namespace="default", name=pod["name"], uid=pod["uid"]))
    run_id = await deliver_event(stack.client, event, FULL, task_queue=stack.task_queue)
    handle = stack.client.get_workflow_handle_for(DeviceIncidentWorkflow.run, event.device.workflow_id,
                                                  run_id=run_id)
    outcome = await asyncio.wait_for(handle.result(), timeout=60)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, outcome.explanation
    job = next(j for j in stack.sim.state()["jobs"] if j["name"] == pod["job"])
    loss = progress_loss(job)
    assert loss.requested_step > 0 and outcome.checkpoint_ids == [f"{pod['job']}-step-{loss.requested_step}"]
    assert loss.covered == 1 and loss.holds, format_loss(loss)
    assert loss.lost_steps == loss.since_requested  # no periodic checkpoint in between: exactly those steps
    assert loss.lost_steps < loss.requested_step  # far less than restarting from scratch
    assert "bound lost <= made since checkpoint: holds" in format_loss(loss)
    print(format_loss(loss))
