"""Heartbeats that start only once an activity has run a while.

The SDK sends an activity's first heartbeat at once and later ones at most every 80 % of the
heartbeat timeout. Each heartbeat the server receives is a write of the workflow's mutable
state; most of podmedic's waits (a checkpoint answer, a restarted pod turning Ready, the old
pod gone) end within a second, so their first heartbeat was a write that told nobody anything:
four per incident in ``python -m benchmarks orchestration``. A wait that lasts beyond the grace
heartbeats as before, so the server still sees it alive long before its heartbeat timeout,
and a cancellation (which reaches an activity only as a heartbeat's answer) is seen at most
the grace later.
"""

from __future__ import annotations

import time
from typing import Any

from temporalio import activity

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
            activity.heartbeat(*details)
