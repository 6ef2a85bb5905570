"""Activity options from a driver's step policy, with the task priorities podmedic uses
(``podmedic/temporal/priorities.py``: why each step gets its own).

The fence itself is a local activity (``local_activity_options``): it runs inside the workflow
task that opened the incident, so no task queue (and no priority) stands between the event and
the DeviceTaintRule.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypedDict

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy

with workflow.unsafe.imports_passed_through():
    from podmedic.domain.policy_steps import StepPolicy
    from podmedic.temporal.priorities import AFTER_FENCE, BACKGROUND, URGENT

__all__ = ["AFTER_FENCE", "BACKGROUND", "GIVE_BACK", "ONE_CALL", "UNTIL_DONE", "URGENT", "ActivityOptions",
           "LocalActivityOptions", "activity_options", "local_activity_options"]

UNTIL_DONE = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
GIVE_BACK = RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=10))
"""What a closing incident gives back (a permit, a storm turn, its hold of a rule): tried for a minute or so,
then left to the owner's own reclaim, so a close never hangs on it."""
"""The storm workflows' own calls (pool fence, storm turns): retried until they succeed, at most 30 s apart."""
ONE_CALL = timedelta(seconds=60)
"""The start-to-close limit of one such call."""


class ActivityOptions(TypedDict):
    """The keyword arguments ``workflow.execute_activity`` takes for a step."""

    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta | None
    retry_policy: RetryPolicy
    summary: str
    priority: Priority


class LocalActivityOptions(TypedDict):
    """The keyword arguments ``workflow.execute_local_activity`` takes for a step."""

    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy
    local_retry_threshold: timedelta
    summary: str


def _retry(step: StepPolicy) -> RetryPolicy:
    retry = step.retry
    return RetryPolicy(
        initial_interval=timedelta(seconds=retry.initial_interval_s),
        backoff_coefficient=retry.backoff_coefficient,
        maximum_interval=timedelta(seconds=retry.max_interval_s),
        maximum_attempts=retry.max_attempts,
        non_retryable_error_types=list(retry.non_retryable_errors),
    )


def activity_options(step: StepPolicy, summary: str, *, min_start_to_close_s: float = 0,
                     priority: Priority = AFTER_FENCE) -> ActivityOptions:
    """Timeouts and retries of one step, exactly as the driver's policy says."""
    return ActivityOptions(
        start_to_close_timeout=timedelta(seconds=max(step.start_to_close_s, min_start_to_close_s)),
        heartbeat_timeout=timedelta(seconds=step.heartbeat_s) if step.heartbeat_s else None,
        retry_policy=_retry(step),
        summary=summary[:200],
        priority=priority,
    )


def local_activity_options(step: StepPolicy, summary: str) -> LocalActivityOptions:
    """The same step as a local activity: the same timeout and retries; a retry that waits longer
    than its first interval waits on a durable timer, not in the worker (no retry is lost to a
    restarted worker, and an unlimited policy never holds a worker slot)."""
    return LocalActivityOptions(
        start_to_close_timeout=timedelta(seconds=step.start_to_close_s),
        retry_policy=_retry(step),
        local_retry_threshold=timedelta(seconds=step.retry.initial_interval_s),
        summary=summary[:200],
    )
