"""A worker told to stop (SIGTERM, as Kubernetes does) lets the running activity finish first.

A real ``podmedic worker`` process runs an incident whose checkpoint waits for a pod that never
answers (the step's own timeout ends it). SIGTERM arrives while it waits: the worker stops taking
tasks but keeps running until the checkpoint activity has completed, within ``--shutdown-grace``,
so the step is recorded as done once, not cancelled and run again by the next worker.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import Phase
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, PodKey
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.e2e_checkpoint.conftest import start_job
from tests.helpers import assert_eventually
from workers.ingest.starts import deliver_event
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

CHECKPOINT_S = 6.0
POLICY = parse_policy(f"""
drivers:
  default:
    node_quarantine: {{enabled: false}}
    checkpoint: {{timeout_s: {CHECKPOINT_S}, poll_s: 0.2}}
    approvals: {{gates: [{{action: taint}}], timeout_s: 600, on_timeout: abort}}
""")


async def test_sigterm_lets_the_running_checkpoint_finish(dev_env: WorkflowEnvironment, sim: SimCluster,
                                                          tmp_path: Path) -> None:
    client = dev_env.client
    task_queue = f"grace-{uuid.uuid4().hex[:8]}"
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "worker", "--kubeconfig", str(sim.kubeconfig_path),
             "--task-queue", task_queue, "--shutdown-grace", "30"],
            env={**os.environ, "PODMEDIC_TEMPORAL_ADDRESS": client.service_client.config.target_host},
            stdout=log, stderr=subprocess.STDOUT)
    try:
        [pod] = start_job(sim, checkpoint_method="annotation", checkpoint_answer="never")
        driver, pool, device = pod["devices"][0].split("/")
        sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=31, message="XID 31")
        event = DeviceHealthEvent(device=DeviceRef(driver=driver, pool=pool, device=device), health=Health.UNHEALTHY,
                                  node=pod["node"], reason="XidError", code=31, message="XID 31", source="test",
                                  observed_at=dt.datetime.now(dt.UTC), event_id=uuid.uuid4().hex,
                                  pod=PodKey(namespace=pod["namespace"], name=pod["name"], uid=pod["uid"]))
        run_id = await deliver_event(client, event, POLICY, task_queue=task_queue)
        handle = client.get_workflow_handle(event.device.workflow_id, run_id=run_id)

        async def checkpointing() -> None:
            state = await handle.query(DeviceIncidentWorkflow.get_state)
            assert state.phase is Phase.CHECKPOINTING, state.phase
        await assert_eventually(checkpointing, timeout=60, interval=0.2)
        worker.send_signal(signal.SIGTERM)
        await asyncio.sleep(1.0)
        assert worker.poll() is None, "the worker left while its activity still ran"
        code = await asyncio.to_thread(worker.wait, 60)
        assert code == 0, (tmp_path / "worker.log").read_text()[-2000:]
        history = await handle.fetch_history()
        scheduled = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                     and e.activity_task_scheduled_event_attributes.activity_type.name == "request_checkpoints"]
        assert len(scheduled) == 1
        ends = [e.event_type for e in history.events if e.event_type in (
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED)
            and _of(e) == scheduled[0].event_id]
        assert ends == [EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED], ends
        assert "running activities get up to 30s to finish" in (tmp_path / "worker.log").read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        await client.get_workflow_handle(f"device/{driver}/{pool}/{device}").terminate("test over")


def _of(event: object) -> int:
    """The scheduled event id an activity's end refers to."""
    for name in ("activity_task_completed_event_attributes", "activity_task_failed_event_attributes",
                 "activity_task_timed_out_event_attributes", "activity_task_canceled_event_attributes"):
        attrs = getattr(event, name)
        if attrs.scheduled_event_id:
            return int(attrs.scheduled_event_id)
    return 0
