"""Heartbeats that start only once an activity has run a while, and that go on while it waits on a call.

The SDK sends an activity's first heartbeat at once and later ones at most every 80 % of the
heartbeat timeout. Each heartbeat the server receives is a write of the workflow's mutable
state; most of podmedic's waits (a checkpoint answer, a restarted pod turning Ready, the old
pod gone) end within a second, so their first heartbeat was a write that told nobody anything:
four per incident in ``python -m benchmarks orchestration``. A wait that lasts beyond the grace
heartbeats as before, so the server still sees it alive long before its heartbeat timeout,
and a cancellation (which reaches an activity only as a heartbeat's answer) is seen at most
the grace later.

An activity that waits on a long call (a Kubernetes request waiting for the QPS budget, an exec in a
thread) is alive, however long the call queues: in a hall-wide storm (``python -m benchmarks storm``)
in-place restarts whose calls queued behind a busy API server timed out without a heartbeat, attempt
after attempt, and their incidents failed (docs/BENCHMARKS.md). ``kept_alive`` heartbeats while such
a call is under way,
with the details last sent (a retried attempt resumes from them, so a keep-alive must not blank
them). A dead worker sends nothing, so the heartbeat timeout still finds it; each call is bounded by
its own timeout, the attempt by its start-to-close timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from temporalio import activity

T = TypeVar("T")

_SENT: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar("podmedic_heartbeat_sent",
                                                                               default=None)

GRACE_S = 1.0
"""How long an activity runs before its first heartbeat (at most a quarter of its heartbeat timeout)."""


class Heartbeat:
    """``activity.heartbeat`` for the current activity, silent during its first ``GRACE_S``.

    Create it at the start of the activity (it reads ``activity.info()``), call it like
    ``activity.heartbeat``.
    """

    def __init__(self, grace_s: float = GRACE_S) -> None:
        timeout = activity.info().heartbeat_timeout
        self.grace_s = min(grace_s, timeout.total_seconds() / 4) if timeout else grace_s
        self.started = time.monotonic()

    def __call__(self, *details: Any) -> None:
        if time.monotonic() - self.started >= self.grace_s:
            beat(*details)


def beat(*details: Any) -> None:
    """``activity.heartbeat``, remembering ``details`` for ``kept_alive``."""
    _SENT.set(details)
    activity.heartbeat(*details)


def _last_details() -> tuple[Any, ...]:
    sent = _SENT.get()
    return tuple(activity.info().heartbeat_details) if sent is None else sent  # the last attempt's, not yet replaced


async def kept_alive(call: Awaitable[T]) -> T:
    """Await ``call``, heartbeating the activity every quarter of its heartbeat timeout while it is
    under way (with the details last sent). Outside an activity, or without a heartbeat timeout, a
    plain await."""
    if not activity.in_activity() or not activity.info().heartbeat_timeout:
        return await call
    timeout = activity.info().heartbeat_timeout
    assert timeout is not None
    every = max(timeout.total_seconds() / 4, 0.1)
    # A timer on the loop, not a task that waits on the call: nearly every call ends long before the first
    # beat, and a timer armed and cancelled costs the loop less than a wait set up around each call
    # (py-spy of the worker's loop in ``python -m benchmarks cost``).
    loop = asyncio.get_running_loop()
    pending = asyncio.ensure_future(call)
    beats: asyncio.TimerHandle | None = None

    def beat_again() -> None:
        nonlocal beats
        if not pending.done():
            activity.heartbeat(*_last_details())  # the timer runs in a copy of this context: the activity's
            beats = loop.call_later(every, beat_again)

    beats = loop.call_later(every, beat_again)
    try:
        return await pending
    except asyncio.CancelledError:
        pending.cancel()
        raise
    finally:
        beats.cancel()
