"""Counting a device's health changes, to tell a flapping device from one that failed once.

Pure: works on the events' own observation times, so the workflow stays deterministic.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from podmedic.domain.models import DeviceHealthEvent, Health


def transitions_within(events: Sequence[DeviceHealthEvent], window_s: float) -> int:
    """Changes between Healthy and not Healthy within ``window_s`` of the latest observation.

    Unhealthy and Unknown count as one side: a device going Unknown → Unhealthy has not
    recovered in between, so it has not flapped.
    """
    ordered = sorted(events, key=lambda e: e.observed_at)
    if len(ordered) < 2:
        return 0
    start = ordered[-1].observed_at - dt.timedelta(seconds=window_s)
    changes = 0
    previous: bool | None = None
    for event in ordered:
        healthy = event.health is Health.HEALTHY
        if previous is not None and healthy != previous and event.observed_at >= start:
            changes += 1
        previous = healthy
    return changes


def healthy_after_the_failure(events: Sequence[DeviceHealthEvent]) -> bool:
    """Whether a Healthy report was observed after the device's latest Unhealthy one: a report of
    health from before the failure (delivered late, or from before a flap) says nothing about now."""
    return healthy_report(events) is not None


def healthy_report(events: Sequence[DeviceHealthEvent]) -> DeviceHealthEvent | None:
    """The latest Healthy report observed after the device's latest Unhealthy one, or ``None``."""
    failed = max((e.observed_at for e in events if e.health is Health.UNHEALTHY), default=None)
    found = [e for e in events
             if e.health is Health.HEALTHY and (failed is None or e.observed_at > failed)]
    return max(found, key=lambda e: e.observed_at, default=None)
