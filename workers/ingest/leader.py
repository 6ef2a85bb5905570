"""Leader election of the ingest replicas: the cluster watches run on the one holding a Lease.

The rules are client-go's (k8s.io/client-go/tools/leaderelection/leaderelection.go), so podmedic
behaves as kube-controller-manager does next to it:

- ``try_acquire_or_renew``: read the Lease (create it when absent); when another identity holds it
  and it has not expired, stand by; else write ourselves in as holder with the resourceVersion read,
  so of two candidates writing at once one gets 409 Conflict. A Lease counts as expired
  ``leaseDurationSeconds`` after *this process saw it change*, by its own monotonic clock: clocks of
  different machines are never compared.
- The leader renews every ``retry_period``; when it cannot for ``renew_deadline`` (shorter than the
  lease duration) it stops leading before anyone else may start. When it stops on purpose it
  releases the Lease (empty holder, duration 1 s), so a standby takes over at once.

Two replicas delivering the same observation for a moment (the old leader's last in-flight
delivery) is harmless: incidents are keyed by device and events by id, so the workflow adds
nothing twice. The election saves the double work, not correctness.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from podmedic.domain.base import Obj
from podmedic.telemetry.metrics import metrics

log = logging.getLogger("podmedic.ingest.leader")

JITTER = 1.2
"""client-go's ``JitterFactor``: a candidate waits ``retry_period`` to ``1.2 x retry_period``."""


class LeaseApi(Protocol):
    """The gateway's Lease calls (``podmedic.kube.leases.LeaseCalls``)."""

    def get_lease(self, namespace: str, name: str) -> Obj | None: ...
    def create_lease(self, namespace: str, name: str, spec: Obj) -> Obj: ...
    def replace_lease(self, lease: Obj, spec: Obj) -> Obj: ...


@dataclass(frozen=True)
class LeaseConfig:
    """Which Lease, who we are, and the three timings (kube-controller-manager's defaults)."""

    namespace: str
    name: str
    identity: str
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


def default_identity(state_dir: Path | None = None) -> str:
    """``<hostname>_<uuid>``, as kube-controller-manager names itself (the hostname is the pod's name).

    With a state directory the name is kept there: a container restarted in the same pod (its
    emptyDir survives) is still the holder and leads again at once, from its own cursors, instead of
    waiting out its own Lease. Two processes never share a state directory (their cursors would clash).
    """
    fresh = f"{socket.gethostname()}_{uuid.uuid4()}"
    if state_dir is None:
        return fresh
    path = Path(state_dir) / "leader-identity"
    try:
        kept = path.read_text().strip()
        if kept:
            return kept
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fresh + "\n")
    except OSError as exc:
        log.warning("cannot keep the leader identity in %s (%s): a restart waits out its own Lease", path, exc)
    return fresh


def micro_time(at: dt.datetime) -> str:
    """A ``metav1.MicroTime`` as the API server reads it: RFC 3339 with exactly six fraction digits.

    Never a zero fraction: the kubernetes client parses a request body's times and writes them back
    with ``isoformat()``, which drops ``.000000``, and the API server refuses a MicroTime without its
    six digits; one microsecond later is the same instant for a lease.
    """
    if at.microsecond == 0:
        at += dt.timedelta(microseconds=1)
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate for one Lease."""

    def __init__(self, kube: LeaseApi, config: LeaseConfig, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        self.kube, self.config = kube, config
        self._clock, self._wall = clock, wall
        self._lease: Obj | None = None
        self._observed: Obj = {}
        self._observed_at = 0.0
        self.leading = False
        self.holder = ""
        """Who holds the Lease as last read (ourselves while leading)."""

    @property
    def _is_holder(self) -> bool:
        return self._observed.get("holderIdentity") == self.config.identity

    def _observe(self, lease: Obj) -> None:
        self._lease = lease
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observed, self._observed_at = dict(spec), self._clock()
        self.holder = str(spec.get("holderIdentity") or "")

    def _expired(self) -> bool:
        duration = float(self._observed.get("leaseDurationSeconds") or 0)
        return self._observed_at + duration <= self._clock()

    def try_acquire_or_renew(self) -> bool:
        """One round: whether we hold the Lease afterwards. Never raises for API errors (they count as no)."""
        now = micro_time(self._wall())
        record: Obj = {"holderIdentity": self.config.identity, "acquireTime": now, "renewTime": now,
                       "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration_s)),
                       "leaseTransitions": 0}
        c = self.config
        try:
            lease = self.kube.get_lease(c.namespace, c.name)
            if lease is None:
                self._observe(self.kube.create_lease(c.namespace, c.name, record))
                return True
            self._observe(lease)
            if self.holder and not self._is_holder and not self._expired():
                return False
            if self._is_holder:
                record["acquireTime"] = self._observed.get("acquireTime") or now
                record["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0)
            else:
                record["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0) + 1
            self._observe(self.kube.replace_lease(lease, record))
            return True
        except Exception as exc:  # as client-go: any failed round (an API error, no answer) is "not now"
            log.info("lease %s/%s: %s", c.namespace, c.name, exc)
            return False

    def release(self) -> None:
        """Give the Lease up (empty holder, 1 s), so a standby need not wait it out; only if still ours."""
        if self._lease is None or not self._is_holder:
            return
        record = {**self._observed, "holderIdentity": "", "leaseDurationSeconds": 1,
                  "renewTime": micro_time(self._wall())}
        try:
            self._observe(self.kube.replace_lease(self._lease, record))
            log.info("lease %s/%s released", self.config.namespace, self.config.name)
        except Exception as exc:  # another replica takes over once it expires
            log.warning("lease %s/%s not released (%s): a standby takes over within %gs", self.config.namespace,
                        self.config.name, exc, self.config.lease_duration_s)

    async def run(self, stop: asyncio.Event, lead: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
        """Campaign until ``stop``; each time we win, run ``lead(lost)`` until leadership ends.

        ``lost`` is set when ``stop`` is set or renewal failed for ``renew_deadline``; ``lead`` must
        return soon after. On ``stop`` the Lease is released.
        """
        c = self.config
        lease = {"lease": f"{c.namespace}/{c.name}"}
        metrics().ingest_leader.set(0, lease)
        while not stop.is_set():
            if not await asyncio.to_thread(self.try_acquire_or_renew):
                await _wait(stop, c.retry_period_s * random.uniform(1.0, JITTER))
                continue
            self.leading = True
            metrics().ingest_leader.set(1, lease)
            log.info("became the leader: Lease %s/%s held as %s", c.namespace, c.name, c.identity)
            lost = asyncio.Event()
            leading = asyncio.create_task(lead(lost))
            try:
                why = await self._renew(stop)
            finally:
                lost.set()
                self.leading = False
                metrics().ingest_leader.set(0, lease)
            # Released before the watch threads have wound down (a watch notices within its timeout): what
            # they still had in flight is not emitted, and a delivery both replicas make is harmless.
            if stop.is_set():
                await asyncio.to_thread(self.release)
            await leading
            if stop.is_set():
                return
            log.warning("stopped leading: %s", why)

    async def _renew(self, stop: asyncio.Event) -> str:
        """Renew every ``retry_period`` until ``stop`` (returns "") or until leadership is lost (returns why)."""
        c = self.config
        renewed = self._clock()
        while not await _wait(stop, c.retry_period_s):
            left = renewed + c.renew_deadline_s - self._clock()
            ok = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(left, 0.01)):
                    ok = await asyncio.to_thread(self.try_acquire_or_renew)
            if ok:
                renewed = self._clock()
            elif self.holder and not self._is_holder:
                return f"the Lease is held by {self.holder}"
            elif self._clock() - renewed >= c.renew_deadline_s:
                return f"could not renew the Lease for {c.renew_deadline_s:g}s"
        return ""


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` or until ``stop``; whether ``stop`` is set.

    ``asyncio.timeout``, never ``asyncio.wait_for``: on Python 3.11 ``wait_for`` returns the inner
    result and swallows a cancellation that arrives as the inner wait completes (CPython gh-86296),
    so a cancelled (killed) replica would go on renewing its Lease and no standby could take over.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
            return True
    return False
