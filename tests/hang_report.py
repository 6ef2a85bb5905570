"""Where each asyncio task waits, printed shortly before pytest-timeout fails a hung test.

pytest-timeout dumps every thread's stack, but a hung async test shows only the event loop in
``select()``: the await that never returned is in a suspended coroutine, on no thread's stack.
This module walks each task's chain of awaits instead, so a hang in CI names its call.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

MARGIN_S = 15.0  # before pytest-timeout's own report, which ends the test


def _frames(awaitable: Any) -> Iterator[FrameType]:
    """The frames of a coroutine and of everything it awaits, outermost first."""
    while awaitable is not None:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is not None:
            yield frame
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)


def describe_tasks(loop: asyncio.AbstractEventLoop) -> str:
    """Each pending task of ``loop`` and the line every coroutine in its chain waits on."""
    lines = []
    try:
        tasks = list(asyncio.all_tasks(loop))
    except RuntimeError as err:  # the loop changed its task set while we read it
        return f"(tasks could not be listed: {err})"
    for task in tasks:
        lines.append(f"task {task.get_name()}: {task.get_coro()!r}")
        for frame in _frames(task.get_coro()):
            lines.append(f"    {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
    return "\n".join(lines) or "(no pending tasks)"


def report_later(loop: asyncio.AbstractEventLoop | None, after_s: float, test: str) -> threading.Timer:
    """Print ``loop``'s tasks to stderr after ``after_s`` unless the returned timer is cancelled."""
    def report() -> None:
        if loop is not None and not loop.is_closed():
            print(f"\n==== {test} still running after {after_s:.0f} s; asyncio tasks:\n{describe_tasks(loop)}",
                  file=sys.stderr, flush=True)

    timer = threading.Timer(after_s, report)
    timer.daemon = True
    timer.start()
    return timer
