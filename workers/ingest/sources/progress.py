"""Workloads that stopped stepping: every reporting pod's ``podmedic.io/progress`` watched, a stall emitted.

A hang no device reports (a link, a peer, a collective stuck) shows only as steps that stop. Every Running
pod that declares the progress protocol (``podmedic.io/reports-progress``) and shows a step is grouped
under its workload (``podmedic/domain/stall.py``, ``workload_of``: a LeaderWorkerSet's by group); when no
such pod of a workload has moved its step for the workload's window (the driver's
``detection.stall.after_s``, or the smallest ``podmedic.io/stall-s`` its pods set), a ``WorkloadStall``
is emitted, once per set of steps it stands at: the same stall is not news, a stall after the steps
moved again is.

A workload that reports no progress is never judged, nor one whose window is 0, nor a pod with a
container not running (crash-looping is its controller's business); a checkpoint podmedic asks for pauses
the steps on purpose, so a new request restarts the clock. The clock is this
process's: a pod first seen now counts from now, so a restarted or newly elected ingest lists the pods
(no cursor) and judges only after a whole window of its own. An emit that fails leaves the stall untold,
and the next tick emits it again.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from podmedic.domain.base import Obj
from podmedic.domain.models import PodKey
from podmedic.domain.policy_file import PolicySet
from podmedic.domain.stall import STALL_S, StalledPod, WorkloadStall, own_window, workload_of
from podmedic.kube import podview
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.resource_ids import pod_device_health
from podmedic.workload import protocol
from workers.ingest.sources.claim_index import ClaimIndex
from workers.ingest.sources.watch_loop import Change, ClusterSource, WatchLoop
from workers.ingest.types import Emit, Stopping

log = logging.getLogger("podmedic.ingest.progress")

WorkloadKey = tuple[str, str, str, str]  # namespace, kind, name, group (a LeaderWorkerSet's)


@dataclass
class _Pod:
    """One reporting pod as last seen."""

    workload: WorkloadKey
    pod: PodKey
    node: str | None
    step: str
    moved_at: float
    window_s: float | None  # its own podmedic.io/stall-s
    device: str | None  # driver/pool/device of a device it holds
    asked: str  # podmedic.io/checkpoint-request as last seen


class ProgressTracker:
    """The steps of every reporting pod and when each last moved, grouped by workload. Thread-safe: the
    watch updates it, the ticker reads it."""

    def __init__(self, policies: PolicySet) -> None:
        self._policies = policies
        self._pods: dict[str, _Pod] = {}  # by pod uid
        self._told: dict[WorkloadKey, tuple[str, ...]] = {}  # the steps a workload's last stall stood at
        self._lock = threading.Lock()
        self.bad_windows: set[str] = set()  # pods whose podmedic.io/stall-s is no number (logged once each)

    def see(self, pod: Obj, device: str | None, now: float) -> None:
        """Take one pod's state: a reporting, Running pod with a step is tracked, any other forgotten."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        notes = podview.annotations_of(pod)
        step, workload = podview.step_of(pod), workload_of(pod)
        if not uid or step is None or workload is None:
            self.forget(uid)
            return
        window = own_window(notes)
        if window is None and STALL_S in notes and uid not in self.bad_windows:
            self.bad_windows.add(uid)
            log.warning("pod %s/%s: %s %r is no number of seconds; the driver's window applies",
                        meta.get("namespace"), meta.get("name"), STALL_S, notes[STALL_S])
        key = (str(meta.get("namespace") or ""), *workload)
        asked = notes.get(protocol.REQUEST, "")
        with self._lock:
            known = self._pods.get(uid)
            # A checkpoint podmedic asked for pauses the steps on purpose: a new request restarts the clock.
            moved = known is None or known.step != step or known.asked != asked
            if moved:
                self._told.pop(key, None)
            self._pods[uid] = _Pod(key, PodKey(namespace=key[0], name=str(meta.get("name") or ""), uid=uid),
                                   (pod.get("spec") or {}).get("nodeName"), step,
                                   now if moved or known is None else known.moved_at, window,
                                   device or (known.device if known else None), asked)

    def knows(self, uid: str) -> bool:
        """Whether the pod is tracked now."""
        with self._lock:
            return uid in self._pods

    def forget(self, uid: str) -> None:
        """A pod gone, stopped or no longer reporting."""
        with self._lock:
            self._pods.pop(uid, None)
            self.bad_windows.discard(uid)

    def keep_only(self, uids: set[str]) -> None:
        """After a relist: forget every pod not listed."""
        with self._lock:
            for uid in [u for u in self._pods if u not in uids]:
                del self._pods[uid]
            self.bad_windows &= uids

    def stalled(self, now: float) -> list[WorkloadStall]:
        """The workloads standing still for their window that were not told at these steps yet."""
        with self._lock:
            groups: dict[WorkloadKey, list[_Pod]] = {}
            for seen in self._pods.values():
                groups.setdefault(seen.workload, []).append(seen)
            for gone in [k for k in self._told if k not in groups]:  # workloads with no reporting pod left
                del self._told[gone]
            found = []
            for key, pods in groups.items():
                stall = self._judge(key, pods, now)
                if stall is not None and self._told.get(key) != stall.steps:
                    found.append(stall)
            return found

    def told(self, stall: WorkloadStall) -> None:
        """The stall was delivered: not news again until the steps move."""
        with self._lock:
            self._told[(stall.namespace, stall.kind, stall.name, stall.group)] = stall.steps

    def _judge(self, key: WorkloadKey, pods: list[_Pod], now: float) -> WorkloadStall | None:
        device = next((p.device for p in pods if p.device), None)
        driver = device.split("/")[0] if device else "default"
        own = [p.window_s for p in pods if p.window_s is not None]
        window = min(own) if own else self._policies.for_driver(driver).detection.stall.after_s
        still = now - max(p.moved_at for p in pods)
        if window <= 0 or still < window:
            return None
        ordered = sorted(pods, key=lambda p: p.pod.name)
        return WorkloadStall(
            namespace=key[0], kind=key[1], name=key[2], group=key[3], driver=driver, stalled_s=round(still, 1),
            after_s=window,
            pods=[StalledPod(pod=p.pod, node=p.node, step=p.step, device=p.device) for p in ordered],
            observed_at=dt.datetime.now(dt.UTC),
            event_id=f"progress/{'/'.join(k for k in key if k)}@" + ",".join(f"{p.pod.uid}={p.step}" for p in ordered))


class ProgressSource(ClusterSource):
    """Watches pods for their progress; a ticker emits the workloads that stopped stepping."""

    name = "progress"
    kind = "pods"

    def __init__(self, kube: KubeGateway, policies: PolicySet, *, claims: ClaimIndex, watch_timeout_s: int = 30,
                 tick_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.tracker = ProgressTracker(policies)
        self.claims = claims
        self.tick_s = tick_s
        self.clock = clock
        # No cursor: the steps' clock is this process's own, so a start lists every pod and times afresh.
        super().__init__(kube, state_dir=None, watch_timeout_s=watch_timeout_s)

    def change(self, kind: str, obj: Obj) -> Change:
        """Track the pod (or forget it when deleted); emits nothing itself."""
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if kind == "DELETED":
            return Change(apply=lambda: self.tracker.forget(uid))
        # Its device is looked up once, when the pod is first tracked: progress moves many times a minute.
        device = self._device(obj) if podview.reports_progress(obj) and not self.tracker.knows(uid) else None
        now = self.clock()
        return Change(apply=lambda: self.tracker.see(obj, device, now))

    def missing(self, listed: list[Obj]) -> Change:
        """After a relist: pods not listed are gone."""
        uids = {str((o.get("metadata") or {}).get("uid") or "") for o in listed}
        return Change(apply=lambda: self.tracker.keep_only(uids))

    def _device(self, pod: Obj) -> str | None:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        reported = pod_device_health(pod, lambda name: self.claims.get(namespace, name))
        first = next(iter(reported.devices), None)
        return first.resource_id if first is not None else None

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Watch in this thread, judge in another, until ``stop``."""
        ticker = threading.Thread(target=self._tick, args=(emit, stop), name="ingest-progress-ticker", daemon=True)
        ticker.start()
        try:
            WatchLoop(self, emit, stop).run()
        finally:
            ticker.join(timeout=max(5.0, self.tick_s * 2))

    def _tick(self, emit: Emit, stop: threading.Event) -> None:
        while not stop.wait(self.tick_s):
            for stall in self.tracker.stalled(self.clock()):
                try:
                    emit(stall)
                except Stopping:
                    return
                except Exception as exc:  # kept untold: the next tick emits it again
                    log.warning("stall of %s not delivered (%s); trying again", stall.workflow_id, exc)
                    continue
                self.tracker.told(stall)
                log.info("%s: no step for %.0fs (window %gs) across %d pod(s): stall delivered", stall.workflow_id,
                         stall.stalled_s, stall.after_s, len(stall.pods))
