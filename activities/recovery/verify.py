"""What "recovered" means, for every rung: the pod is Ready, every device it reports is Healthy,
and, when the workload reports progress, it has moved past where it stood at the restart.

A workload declares that it reports progress with the pod annotation
``podmedic.io/reports-progress: "true"`` and keeps ``podmedic.io/progress`` at its current
step (or any number that grows while it works: samples, tokens). The value read when the pod
is first seen Ready after the restart is the baseline; verification passes once a later read
is larger. A smaller read means the workload resumed from an older checkpoint and rewrote its
number: it becomes the baseline. A Ready pod whose number never moves (hung NCCL, a dead data
loader) fails the rung.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity

from activities.heartbeat import Heartbeat
from podmedic.domain.base import Obj
from podmedic.kube import podview
from podmedic.kube.gateway import ServerError, Throttled
from podmedic.kube.reflector import live_reads
from podmedic.workload.protocol import PROGRESS


def progress_of(pod: Obj) -> int | None:
    """The pod's ``podmedic.io/progress`` value, or ``None`` when absent or not a number."""
    raw = podview.annotations_of(pod).get(PROGRESS)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


class Verification:
    """Feed it the candidate pod on every poll (``None``: not Ready/Healthy yet); it answers
    the pod once it is verified, progress included."""

    def __init__(self, want_progress: bool) -> None:
        self.want_progress = want_progress
        self.baseline: int | None = None
        self.ready_seen = False
        self.progress_checked = False
        self.resumed_from: int | None = None  # the step written before the restart, when the workload went back

    def offer(self, pod: Obj | None) -> Obj | None:
        """The verified pod, or ``None`` to keep polling."""
        if pod is None:
            return None
        self.ready_seen = True
        if not (self.want_progress and podview.reports_progress(pod)):
            return pod
        self.progress_checked = True
        value = progress_of(pod)
        if self.baseline is None:
            self.baseline = value  # the first reading after the restart (None: not reported yet)
            return None
        if value is not None and value < self.baseline:
            # The restarted workload resumed from a checkpoint older than the step it last wrote before the
            # restart (still on the pod, and read as the baseline): it rewrote its progress, so from here
            # progress means moving past where it resumed. Waiting for the old step would fail every rung
            # whose checkpoint is further back than the rung's timeout (a storm: 163 steps in 120 s).
            self.resumed_from = self.baseline
            self.baseline = value
            return None
        return pod if value is not None and value > self.baseline else None

    def progress_note(self, pod: Obj) -> str:
        """How the progress check went, for the result's detail."""
        if not self.progress_checked:
            return "workload does not report progress (no podmedic.io/reports-progress)"
        resumed = f" (resumed from a checkpoint; step {self.resumed_from} before the restart)" \
            if self.resumed_from is not None else ""
        return f"workload progressing: step {self.baseline} -> {progress_of(pod)}{resumed}"

    def failure(self, timeout_s: float, what: str) -> str:
        """Why verification did not pass within ``timeout_s``."""
        if not self.ready_seen:
            return f"{what}: not Ready with Healthy devices within {timeout_s:g}s"
        if self.baseline is None:
            return f"{what}: Ready with Healthy devices, but no podmedic.io/progress reported within {timeout_s:g}s"
        return (f"{what}: Ready with Healthy devices, but the workload did not progress past step "
                f"{self.baseline} within {timeout_s:g}s")


async def poll(check: Callable[[], Awaitable[Any]], timeout_s: float, poll_s: float, *details: Any) -> Any:
    """Await ``check`` until it returns a value or ``timeout_s`` passes (``None``);
    ``details`` are heartbeated so a retried attempt resumes where this was (after the first second
    of waiting: ``activities/heartbeat.py``). The last call, at the
    deadline, reads pods from the API server (``live_reads``)."""
    deadline = time.monotonic() + timeout_s
    heartbeat = Heartbeat()
    while True:
        last = time.monotonic() >= deadline
        try:
            if last:
                # The pods polled come from the worker's watch (podmedic/kube/pod_cache.py); a verdict
                # that fails the rung is taken from the API server itself, never from a watch that lags.
                with live_reads():
                    found = await check()
            else:
                found = await check()
        except (ServerError, Throttled) as err:
            # One failed read of a bounded poll is a poll that saw nothing yet: failing the whole
            # attempt for it would redo the rung's action bookkeeping and burn a retry on a blip.
            activity.logger.info("poll read failed, polling again: %s", err)
            found = None
        if found is not None:
            if last:
                activity.logger.warning("poll: found on the last look, read from the API server")
            return found
        if last:
            return None
        heartbeat(*details)
        await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
