"""The one way an incident waits before it acts: until something it was told, or for at most a while.

An approval gate waits for an operator's answer, a guard permit for the guard's wake-up, a storm turn
for the keeper's word; each also ends on what stops the incident (an abort, a resolution). Each wait is
one durable timer (``summary`` names it in the event history) raced against the workflow's own state,
which its signals and updates change. The caller says what ends the wait and what the time running out
means: ask again, go on, or give up as the policy says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow


@dataclass
class WaitState:
    """What an incident's waits were told, and what they asked and must give back when it closes."""

    guard_woke: bool = False
    """The fleet guard has room again (its ``guard_wake`` signal): a held permit asks now."""
    guard_asked: bool = False
    """The incident asked the fleet guard: it gives its permit back when it closes."""
    turn_given: bool = False
    """A storm's keeper let the incident act (its ``storm_turn`` signal)."""
    turn_asked: bool = False
    """The incident asked a storm's keeper for a turn: it gives the turn back when it closes."""


async def wait_for(until: Callable[[], bool], *, at_most_s: float, summary: str) -> bool:
    """Wait until ``until()`` holds, at most ``at_most_s`` seconds; True when it held, False when the time ran out.

    ``until`` is read after every signal and update the workflow receives: it must read the workflow's state
    only (no I/O, no clock).
    """
    try:
        await workflow.wait_condition(until, timeout=timedelta(seconds=at_most_s), timeout_summary=summary)
    except TimeoutError:
        return False
    return True
