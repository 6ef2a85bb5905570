"""An activity waiting on a slow call stays alive, and keeps what a retry resumes from
(``activities/heartbeat.py``; ``activities/base.py`` awaits every API call of an activity so).

The Temporal dev server (heartbeat timeouts are real time there). In the 10,000-device storm calls
queued past the 20 s heartbeat timeout on the worker's threads and every attempt of 12 in-place
restarts timed out; here a 1 s heartbeat timeout and a 3 s call stand for them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.heartbeat import beat, kept_alive

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLOW_CALL_S = 3.0


class Call(BaseModel):
    """How the activity waits on its slow call, and whether it fails after it."""

    kept_alive: bool = True
    fail_after: bool = False


@activity.defn(name="slow_call")
async def slow_call(how: Call) -> list[Any]:
    """Heartbeats where it got to, waits on a slow call kept alive (or, the control, a plain await); a
    retried attempt returns what the first left to resume from."""
    if activity.info().attempt > 1:
        return list(activity.info().heartbeat_details)
    beat("evicted", 7)
    if how.kept_alive:
        await kept_alive(asyncio.to_thread(time.sleep, SLOW_CALL_S))
    else:
        await asyncio.to_thread(time.sleep, SLOW_CALL_S)
    if how.fail_after:
        raise RuntimeError("a failure after the slow call: the next attempt resumes")
    return ["done"]


@workflow.defn(name="SlowCall")
class SlowCallWorkflow:
    @workflow.run
    async def run(self, how: Call) -> list[Any]:
        result: list[Any] = await workflow.execute_activity(
            slow_call, how, start_to_close_timeout=timedelta(seconds=30), heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100),
                                     maximum_attempts=2 if how.fail_after else 1))
        return result


async def _run(env: WorkflowEnvironment, how: Call) -> list[Any]:
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    # Unsandboxed: what is under test is the activity.
    async with Worker(env.client, task_queue=queue, workflows=[SlowCallWorkflow], activities=[slow_call],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        return await env.client.execute_workflow(SlowCallWorkflow.run, how, id=queue, task_queue=queue)


async def test_a_slow_call_keeps_its_activity_alive(dev_env: WorkflowEnvironment) -> None:
    assert await _run(dev_env, Call()) == ["done"]


async def test_a_retry_resumes_from_the_details_sent_before_the_slow_call(dev_env: WorkflowEnvironment) -> None:
    assert await _run(dev_env, Call(fail_after=True)) == ["evicted", 7]


async def test_without_the_keep_alive_the_same_wait_is_a_heartbeat_timeout(dev_env: WorkflowEnvironment) -> None:
    # The control: the same call with no heartbeat until it returns.
    with pytest.raises(WorkflowFailureError) as failed:
        await _run(dev_env, Call(kept_alive=False))
    cause = failed.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, TimeoutError)
    assert cause.cause.type is TimeoutType.HEARTBEAT
