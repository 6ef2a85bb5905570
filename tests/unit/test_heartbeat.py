"""An activity's heartbeats start after its grace, and the grace never nears the heartbeat timeout.

Run in Temporal's ``ActivityEnvironment`` (a real activity context), which hands every heartbeat
the activity sends to ``on_heartbeat``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.heartbeat import GRACE_S, Heartbeat

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _environment(sent: list[tuple[Any, ...]], heartbeat_timeout: timedelta | None) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=heartbeat_timeout)
    env.on_heartbeat = lambda *details: sent.append(details)
    return env


async def test_no_heartbeat_during_the_grace_then_every_call_goes_out() -> None:
    sent: list[tuple[Any, ...]] = []

    async def waits() -> float:
        beat = Heartbeat(grace_s=0.2)
        beat("early")
        await asyncio.sleep(0.3)
        beat("late", 1)
        beat("later", 2)
        return beat.grace_s

    grace = await _environment(sent, timedelta(seconds=10)).run(waits)
    assert grace == 0.2
    assert sent == [("late", 1), ("later", 2)]


@pytest.mark.parametrize(("timeout", "grace"), [(timedelta(seconds=2), 0.5), (None, GRACE_S),
                                                (timedelta(seconds=60), GRACE_S)])
async def test_the_grace_is_at_most_a_quarter_of_the_heartbeat_timeout(timeout: timedelta | None,
                                                                      grace: float) -> None:
    async def made() -> float:
        return Heartbeat().grace_s

    assert await _environment([], timeout).run(made) == grace
