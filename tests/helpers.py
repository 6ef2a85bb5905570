"""Test helpers shared across suites."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def assert_eventually(
    check: Callable[[], Awaitable[T]], *, timeout: float = 30.0, interval: float = 0.2
) -> T:
    """Await ``check`` until it stops raising ``AssertionError``; re-raise the last one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)


def wait_until(check: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.1, what: str = "") -> T:
    """Poll a synchronous ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(interval)
