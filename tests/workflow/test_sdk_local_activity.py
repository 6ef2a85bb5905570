"""What temporalio raises in a workflow when a local activity fails: the activity's own error, unwrapped.

An activity's failure reaches the workflow as ``ActivityError`` whose cause is the activity's error (Temporal's
failure model: ``ActivityFailureInfo`` around the cause); a local activity's, in temporalio 1.35, arrives as the
``ApplicationError`` it raised, with no ``ActivityError`` around it. ``_local_taint``
(``workflows/device/disruptive_steps.py``) turns that bare error into the incident's ``IncidentStopped`` as every
other step that gives up; if the SDK starts wrapping it, this test fails and that translation is the code to delete.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker


@activity.defn
async def refuses() -> None:
    raise ApplicationError("refused", type="InvalidObject", non_retryable=True)


@workflow.defn(sandboxed=False)
class FailsOnce:
    @workflow.run
    async def run(self, local: bool) -> str:
        options = {"start_to_close_timeout": timedelta(seconds=5), "retry_policy": RetryPolicy(maximum_attempts=1)}
        try:
            if local:
                await workflow.execute_local_activity(refuses, **options)  # type: ignore[arg-type]
            else:
                await workflow.execute_activity(refuses, **options)  # type: ignore[arg-type]
        except (ActivityError, ApplicationError) as err:
            cause = err.cause if isinstance(err, ActivityError) else None
            return f"{type(err).__name__}/{type(cause).__name__ if cause else '-'}"
        return "no error"


async def test_a_failed_local_activity_raises_its_own_error_and_an_activity_an_activity_error(
        time_skipping_env: WorkflowEnvironment, task_queue: str) -> None:
    client = time_skipping_env.client
    async with Worker(client, task_queue=task_queue, workflows=[FailsOnce], activities=[refuses]):
        seen = {local: await client.execute_workflow(FailsOnce.run, local, id=f"la-{uuid.uuid4().hex}",
                                                     task_queue=task_queue)
                for local in (True, False)}
    assert seen == {True: "ApplicationError/-", False: "ActivityError/ApplicationError"}
