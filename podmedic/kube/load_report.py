"""What a process (the worker, the ingest) asked of the API server, logged once a minute: a shared
API server's operator reads it beside API Priority and Fairness' own figures.

Like client-go's "Waited for ... due to client-side throttling" lines, but one line a minute instead
of one per wait: the requests sent in the minute and since the start, the most given out in one
second (with a limit, never more than QPS + burst), the time spent waiting for the limit, and the
requests the API server refused as throttling (429, ``Retry-After``) that were sent again after it.
Silent in a minute without requests; a last line, with the totals, when the process stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from podmedic.kube.throttle import TokenBucket

log = logging.getLogger("podmedic.kube.load")

REPORT_EVERY_S = 60.0


@dataclass
class KubeLoadReport:
    """The lines of one limiter's reports; remembers where the last one left off."""

    limiter: TokenBucket
    _taken: int = 0

    def line(self, every_s: float) -> str | None:
        """The report of the requests since the last one; ``None`` when there were none."""
        bucket = self.limiter
        sent, self._taken = bucket.taken - self._taken, bucket.taken
        if sent == 0:
            return None
        return f"kube client: {sent} requests in the last {every_s:g}s, {self._taken} in all; {self.totals()}"

    def totals(self) -> str:
        """The figures since the start."""
        bucket = self.limiter
        limit = f"limit {bucket.qps:g} QPS, burst {bucket.burst}" if bucket.qps > 0 else "no limit set"
        return (f"at most {bucket.max_per_second} given out in one second ({limit}); "
                f"{bucket.waited_s:.1f}s waited for the limit; "
                f"{bucket.refused} throttled by the API server (429) and sent again")


@contextlib.asynccontextmanager
async def kube_load_reports(limiter: TokenBucket, every_s: float = REPORT_EVERY_S) -> AsyncIterator[KubeLoadReport]:
    """Log ``limiter``'s figures every ``every_s`` while the body runs, and its totals at the end."""
    report = KubeLoadReport(limiter)

    async def every_minute() -> None:
        while True:
            await asyncio.sleep(every_s)
            if (line := report.line(every_s)) is not None:
                log.info("%s", line)

    task = asyncio.get_running_loop().create_task(every_minute())
    try:
        yield report
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        log.info("kube client: %d requests in all; %s", limiter.taken, report.totals())
