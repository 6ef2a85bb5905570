"""Posting CloudEvents batches to podmedic's ingest, with retries and a bounded spool.

Events wait in a spool until the ingest service accepts them (2xx). A 5xx, 408, 429 or a
connection failure keeps them and backs off (doubling, with jitter, up to a ceiling); a full
spool drops its oldest events with a warning, so a long ingest outage costs the oldest
readings, never the agent's memory. A 413 halves the batch size. Any other answer (400
malformed, 401 token refused, 415) is logged with the server's reason and the batch is
dropped: sending it again would get the same answer.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import aiohttp

log = logging.getLogger(__name__)

BATCH = "application/cloudevents-batch+json"
_RETRY_STATUS = frozenset({408, 429})


class Poster:
    """Sends spooled CloudEvents to ``<ingest_url>/v1/events`` in batches.

    Args:
        ingest_url: Base URL of the ingest service (``http://podmedic-ingest:8080``).
        token: The bearer token, or ``None`` to send none.
        token_file: A file holding the token; read before each flush, so a rotated secret
            is picked up. Takes precedence over ``token``.
        spool_max: Events kept while the ingest cannot be reached.
        batch_max: Events per request.
        backoff_s: First and largest delay between retries.
        timeout_s: Limit of one request.
        clock: Monotonic clock (tests pass their own).
    """

    def __init__(self, ingest_url: str, *, token: str | None = None, token_file: Path | None = None,
                 spool_max: int = 10_000, batch_max: int = 200, backoff_s: tuple[float, float] = (1.0, 60.0),
                 timeout_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        if spool_max < 1 or batch_max < 1:
            raise ValueError("spool_max and batch_max must be at least 1")
        self.url = ingest_url.rstrip("/") + "/v1/events"
        self._token, self._token_file = token, token_file
        self._spool: deque[dict[str, Any]] = deque()
        self._spool_max, self._batch_max = spool_max, batch_max
        self._backoff = backoff_s
        self._delay = backoff_s[0]
        self._retry_at = 0.0
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self.accepted = self.rejected = self.dropped = 0

    @property
    def pending(self) -> int:
        """Events waiting in the spool."""
        return len(self._spool)

    @property
    def retry_in(self) -> float:
        """Seconds until the next attempt is allowed (0 when not backing off)."""
        return max(0.0, self._retry_at - self._clock())

    def enqueue(self, events: Iterable[dict[str, Any]]) -> None:
        """Add events to the spool; when full, drop the oldest with a warning."""
        self._spool.extend(events)
        self._trim()

    def _trim(self) -> None:
        over = len(self._spool) - self._spool_max
        if over > 0:
            for _ in range(over):
                self._spool.popleft()
            self.dropped += over
            log.warning("spool full (%d events): dropped the %d oldest; the ingest at %s is not accepting events",
                        self._spool_max, over, self.url)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": BATCH}
        token = self._token
        if self._token_file is not None:
            try:
                token = self._token_file.read_text().strip()
            except OSError as exc:
                log.error("cannot read the token file %s (%s); sending without a token", self._token_file, exc)
                token = None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    async def flush(self) -> int:
        """Send what the spool holds, unless backing off. Returns the events accepted."""
        sent = 0
        while self._spool and self._clock() >= self._retry_at:
            batch = [self._spool.popleft() for _ in range(min(self._batch_max, len(self._spool)))]
            outcome = await self._send(batch)
            if outcome == "smaller":
                self._spool.extendleft(reversed(batch))
                self._batch_max = max(1, len(batch) // 2)
                continue
            if outcome == "retry":
                self._spool.extendleft(reversed(batch))
                self._trim()
                # Jitter, so that a fleet of agents does not return in step when the ingest comes back.
                self._retry_at = self._clock() + min(self._delay * random.uniform(0.8, 1.2), self._backoff[1])
                self._delay = min(self._delay * 2, self._backoff[1])
                break
            self._delay = self._backoff[0]
            if outcome == "accepted":
                sent += len(batch)
                self.accepted += len(batch)
            else:
                self.rejected += len(batch)
        return sent

    async def _send(self, batch: list[dict[str, Any]]) -> str:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.post(self.url, data=json.dumps(batch), headers=self._headers()) as resp:
                reason = (await resp.text())[:2000]
                status = resp.status
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.warning("ingest %s unreachable (%s: %s); %d events kept, retrying in about %.0f s",
                        self.url, type(exc).__name__, exc, len(batch) + len(self._spool), self._delay)
            return "retry"
        if 200 <= status < 300:
            return "accepted"
        if status >= 500 or status in _RETRY_STATUS:
            log.warning("ingest answered %d (%s); %d events kept, retrying in about %.0f s",
                        status, reason.strip()[:300], len(batch) + len(self._spool), self._delay)
            return "retry"
        if status == 413 and len(batch) > 1:
            log.warning("ingest refused a batch of %d events as too large; sending %d per request from now on",
                        len(batch), max(1, len(batch) // 2))
            return "smaller"
        hint = " (check --token-file / PODMEDIC_INGEST_TOKEN)" if status in (401, 403) else ""
        log.error("ingest refused %d events with %d%s: %s; not retried", len(batch), status, hint, reason.strip())
        return "rejected"

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None
