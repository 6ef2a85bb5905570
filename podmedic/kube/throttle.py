"""A light touch on a shared API server: client-side QPS and burst, and the server's ``Retry-After``.

As client-go does (k8s.io/client-go/util/flowcontrol/throttle.go, ``NewTokenBucketRateLimiter(qps,
burst)``; rest/request.go retries a 429 that carries ``Retry-After``, at most 10 times): every
request of a process first takes a token from one bucket that refills at ``qps`` a second and holds
at most ``burst``; a 429 from API Priority and Fairness (or max-in-flight) is tried again after the
seconds its ``Retry-After`` asks. A 429 that refuses an eviction because of a PodDisruptionBudget is
not throttling: it is returned at once, and the recovery ladder's PDB rule decides.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from urllib3.connectionpool import ConnectionPool
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

MAX_RETRIES = 10
"""client-go's ``maxRetries`` for answers with ``Retry-After``."""
MAX_WAIT_S = 60.0
"""At most this long asleep on ``Retry-After`` per call; then the call fails as throttled and the step's
own retry policy (Temporal) takes over, so one call never outlives its activity's timeout by much."""


@dataclass
class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` saved; ``take`` blocks until one is there.

    ``qps`` 0 turns the limit off. Thread-safe: the worker's activities call from many threads.
    """

    qps: float
    burst: int
    _tokens: float = field(init=False)
    _at: float = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    waited_s: float = field(init=False, default=0.0)
    """Time spent waiting for tokens since the start."""
    taken: int = field(init=False, default=0)
    """Tokens taken since the start, one per request sent, whether or not a limit is set."""
    max_per_second: int = field(init=False, default=0)
    """The most tokens given out in one whole second since the start (by the time each was free to go):
    with a limit, never more than ``qps + burst``."""
    refused: int = field(init=False, default=0)
    """Requests the API server refused as throttling (429 with ``Retry-After``) and that were sent again."""
    _start: float = field(init=False)
    _second: int = field(init=False, default=0)
    _in_second: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.qps < 0 or self.burst < 1:
            raise ValueError(f"qps must be >= 0 and burst >= 1 (got qps={self.qps}, burst={self.burst})")
        self._tokens = float(self.burst)
        self._at = self._start = time.monotonic()

    def take(self) -> float:
        """Take one token, sleeping until there is one; returns the seconds slept."""
        wait = self.reserve()
        if wait > 0:
            time.sleep(wait)
        return wait

    def reserve(self) -> float:
        """Take one token now and return how long to wait before it may be spent (the event loop's
        ``take``: it sleeps without blocking, ``podmedic/kube/loop_http.py``)."""
        with self._lock:
            now = time.monotonic()
            wait = 0.0
            if self.qps > 0:
                self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
                self._at = now
                self._tokens -= 1.0  # reserve now; a negative balance is the queue ahead of us
                wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
                self.waited_s += wait
            self._count(now + wait)
        return wait

    def note_refused(self) -> None:
        """The API server refused one of the requests as throttling; it goes again after ``Retry-After``."""
        with self._lock:
            self.refused += 1

    def _count(self, free_at: float) -> None:
        # Tokens are reserved in order, so each is free no earlier than the one before: one running count.
        self.taken += 1
        second = int(free_at - self._start)
        if second != self._second:
            self._second, self._in_second = second, 0
        self._in_second += 1
        self.max_per_second = max(self.max_per_second, self._in_second)


class BudgetedRetry(Retry):
    """urllib3's own tries again (a connection that broke), each after a token of ``bucket``; never a
    try again on an answer's status, so a 429's ``Retry-After`` is ``GatewayCore._send``'s to honour.

    urllib3's default (``Retry(3)``) sends a GET, PUT or DELETE that got a 429 with ``Retry-After``
    again by itself, around the client's limiter (tests/sim/test_flow_control.py).
    """

    bucket: TokenBucket | None = None

    def __init__(self, *args: Any, bucket: TokenBucket | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("status", 0)
        kwargs.setdefault("respect_retry_after_header", False)
        super().__init__(*args, **kwargs)
        self.bucket = bucket

    def new(self, **kw: Any) -> Self:
        retry = super().new(**kw)
        retry.bucket = self.bucket
        return retry

    def increment(self, method: str | None = None, url: str | None = None,
                  response: BaseHTTPResponse | None = None, error: Exception | None = None,
                  _pool: ConnectionPool | None = None, _stacktrace: TracebackType | None = None) -> Self:
        retry = super().increment(method, url, response, error, _pool, _stacktrace)  # raises when spent
        if self.bucket is not None:
            self.bucket.take()  # the request goes out again: it costs a token like any other
        return retry


def throttle_wait(status: int, headers: object, body: str | None) -> float | None:
    """Seconds to wait before trying again, when ``status`` is throttling with ``Retry-After``; else ``None``.

    A PodDisruptionBudget refusal (a Status whose causes name ``DisruptionBudget``) is not throttling.
    """
    if status != 429:
        return None
    value = _header(headers, "Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    if _refused_by_budget(body):
        return None
    return max(0.0, seconds)


def _header(headers: object, name: str) -> str | None:
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    value = getter(name)
    return str(value) if value is not None else None


def _refused_by_budget(body: str | None) -> bool:
    try:
        status = json.loads(body or "")
    except ValueError:
        return False  # APF answers in plain text ("Too many requests, please try again later.")
    causes = ((status.get("details") or {}).get("causes") or []) if isinstance(status, dict) else []
    return any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes)


def budget_refusal(body: str | None) -> str:
    """Why an Eviction was refused with 429 (a PodDisruptionBudget), in the Status's own words: its
    message and its causes' (kubernetes pkg/registry/core/pod/storage/eviction.go)."""
    try:
        status = json.loads(body or "{}")
    except ValueError:
        status = {}
    status = status if isinstance(status, dict) else {}
    causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes") or [] if isinstance(c, dict)]
    return "; ".join([status.get("message") or "eviction refused (429)", *filter(None, causes)])


def sleep_for_retry(seconds: float, slept_so_far: float) -> bool:
    """Sleep ``seconds`` unless that would pass ``MAX_WAIT_S`` in all; whether it slept."""
    if slept_so_far + seconds > MAX_WAIT_S:
        return False
    time.sleep(seconds)
    return True
