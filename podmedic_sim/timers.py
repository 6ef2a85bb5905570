"""One timer wheel for all simulated controllers, run on the simulator's event loop.

Controllers never sleep in their own loops: they schedule callbacks here, and store
listeners only ``kick`` a ``Coalescer`` so that a burst of changes becomes one pass. This
keeps a 10,000-node cluster idle when nothing happens and lets tests run in seconds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Timers:
    """A heap of callbacks due at monotonic times; ``run`` fires them until cancelled."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._wake: asyncio.Future[None] | None = None

    @staticmethod
    def now() -> float:
        """The clock the timers use (monotonic seconds)."""
        return time.monotonic()

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` after ``delay`` seconds (at the next turn when ``delay`` is 0)."""
        self.call_at(self.now() + max(delay, 0.0), fn)

    def call_at(self, when: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at monotonic time ``when``."""
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (when, next(self._seq), fn))
        if earliest is None or when < earliest:
            self._wake_up()

    def fire_due(self) -> int:
        """Run every callback that is due now; returns how many ran."""
        ran = 0
        now = self.now()
        while self._heap and self._heap[0][0] <= now:
            _, _, fn = heapq.heappop(self._heap)
            ran += 1
            try:
                fn()
            except Exception:  # one broken callback must not stop the whole cluster
                log.exception("simulator timer callback failed")
        return ran

    async def run(self) -> None:
        """Fire callbacks as they fall due, until the task is cancelled."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                self.fire_due()
                timeout = self._heap[0][0] - self.now() if self._heap else None
                if timeout is not None and timeout <= 0:
                    await asyncio.sleep(0)  # let HTTP handlers run between busy bursts
                    continue
                # A bare future rather than wait_for(): wait_for can swallow a cancellation
                # that races with the wake-up (Python 3.11), which would hang shutdown.
                self._wake = loop.create_future()
                handle = loop.call_later(timeout, self._wake_up) if timeout is not None else None
                try:
                    await self._wake
                finally:
                    if handle is not None:
                        handle.cancel()
        finally:
            self._wake = None

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)


class Coalescer:
    """Runs ``fn`` once after ``delay`` however many times ``kick`` is called meanwhile."""

    def __init__(self, timers: Timers, delay: float, fn: Callable[[], None]) -> None:
        self._timers = timers
        self._delay = delay
        self._fn = fn
        self._armed = False

    def kick(self, delay: float | None = None) -> None:
        """Ask for a run; a run already armed absorbs this request."""
        if self._armed:
            return
        self._armed = True
        self._timers.call_later(self._delay if delay is None else delay, self._run)

    def _run(self) -> None:
        self._armed = False
        self._fn()
