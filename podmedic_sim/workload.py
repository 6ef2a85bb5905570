"""Simulated GPU training workloads and the checkpoint / in-place restart protocol.

A training Job advances one step per ``timings.workload_step_s`` while all its pods
(``parallelism``) are Running and Ready, like synchronous data-parallel training. Any of
its containers stopping loses the steps since the last checkpoint. The protocol with
podmedic runs over pod annotations; see docs/simulator.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim import workload_http
from podmedic_sim.collectives import Collectives
from podmedic_sim.config import SimConfig
from podmedic_sim.jobs import JobController, JobKey, owning_job
from podmedic_sim.kubelet import Kubelet
from podmedic_sim.kubelet_pods import KILL_EXIT_CODE
from podmedic_sim.kubelet_status import ContainerRt, PodKey, PodRt
from podmedic_sim.store import NotFound, Store, WatchEvent
from podmedic_sim.timers import Timers
from podmedic_sim.training_groups import JOBSET_NAME, TrainingGroups, group_of
from podmedic_sim.workload_http import HttpAnswer
from podmedic_sim.workload_protocol import (
    CHECKPOINTED_STEP,
    CKPT_ACK,
    CKPT_ANSWER,
    CKPT_ERROR,
    CKPT_ID,
    CKPT_LOCATION,
    CKPT_METHOD,
    CKPT_REQUEST,
    DEFAULT_RESTART_EXIT_CODE,
    LOST_STEPS,
    PROGRESS,
    RESTART_EXIT_CODE,
    RESTART_REQUEST,
    SIGTERM_CHECKPOINT,
    STEP,
    TRAINING,
    Progress,
)


@dataclass
class _PodWork:
    job: JobKey
    answered: set[str] = field(default_factory=set)
    handled_restarts: set[str] = field(default_factory=set)
    saving: str | None = None
    seen: tuple[str, str] = ("", "")
    answers: dict[str, tuple[str, str]] = field(default_factory=dict)  # request -> (id, location)
    waiters: dict[str, list[asyncio.Future[HttpAnswer]]] = field(default_factory=dict)


class Workloads:
    """Training progress, checkpoints and restart requests of all training Jobs."""

    def __init__(
        self, store: Store, config: SimConfig, timers: Timers, kubelet: Kubelet, jobs: JobController,
        at_barrier: Callable[[str], bool] = lambda uid: False,
    ) -> None:
        self._store = store
        self._config = config
        self._t = config.timings
        self._timers = timers
        self._kubelet = kubelet
        self._jobs = jobs
        self._at_barrier = at_barrier  # a JobSet's in-place restart holds the pod's worker (in_place_restart.py)
        self.progress: dict[JobKey, Progress] = {}
        self._work: dict[str, _PodWork] = {}  # by pod uid
        self._ticking = False
        self._groups = TrainingGroups(store)  # JobSets', StatefulSets' training pods
        self.collectives = Collectives(timers, kubelet, self._pods_of, self.progress)
        kubelet.hooks.append(self)
        jobs.on_pod_created.append(self._pod_created)

    # -- store and controller events ---------------------------------------------------
    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: training Jobs appear; pods get protocol annotations."""
        obj, meta = ev.obj, ev.obj["metadata"]
        if ev.resource == "jobs" and ev.type != "DELETED":
            tmpl = (obj.get("spec", {}).get("template") or {}).get("metadata") or {}
            # A JobSet's Job trains as part of the JobSet (one synchronous job, training_groups.py): its
            # pods' progress is the JobSet's, never a step count of its own that moves while a peer hangs.
            in_jobset = JOBSET_NAME in (meta.get("labels") or {})
            if (tmpl.get("annotations") or {}).get(TRAINING) == "true" and not in_jobset:
                key = (meta.get("namespace", "default"), meta["name"])
                prog = self.progress.setdefault(key, Progress(*key))
                prog.parallelism = int(obj.get("spec", {}).get("parallelism") or 1)
                prog.saves_on_sigterm = (tmpl.get("annotations") or {}).get(SIGTERM_CHECKPOINT) == "true"
                self._ensure_ticking()
            return
        if ev.resource != "pods" or (meta.get("annotations") or {}).get(TRAINING) != "true":
            return
        uid = meta.get("uid", "")
        if ev.type == "DELETED":
            self._timers.call_later(1.0, lambda: self._drop(uid))
            self._groups.leave((meta.get("namespace", "default"), meta["name"]))
            return
        owner = owning_job(obj)
        work = self._work.get(uid)
        if work is None:
            group = group_of(obj, owned_by_job=owner is not None)
            job = (meta.get("namespace", "default"), group or (owner[0] if owner else meta["name"]))
            work = self._work[uid] = _PodWork(job)
            self.collectives.configure(job, meta.get("annotations") or {})
            if group is not None:  # a JobSet's, or a StatefulSet's (LeaderWorkerSet's) pods: one group
                self._groups.join(job, obj, self.progress)
                self._ensure_ticking()
        ann = meta.get("annotations") or {}
        seen = (ann.get(CKPT_REQUEST, ""), ann.get(RESTART_REQUEST, ""))
        if seen != work.seen:
            work.seen = seen
            pkey = (meta.get("namespace", "default"), meta["name"])
            self._timers.call_later(0, lambda: self._check(pkey, uid))

    def _drop(self, uid: str) -> None:
        self._work.pop(uid, None)

    def _pod_created(self, job: Obj, pod: Obj) -> None:
        prog = self.progress.get(
            (job["metadata"].get("namespace", "default"), job["metadata"]["name"])
        )
        if prog is not None:
            prog.pods_created += 1

    def on_container_started(self, rt: PodRt, c: ContainerRt) -> None:
        """Kubelet hook: a container (re)started; requests that waited for it proceed."""
        if rt.uid in self._work:
            self._timers.call_later(0, lambda: self._check(rt.key, rt.uid))

    def on_container_stopped(self, rt: PodRt, c: ContainerRt) -> None:
        """Kubelet hook: in-memory state since the last checkpoint is gone."""
        work = self._work.get(rt.uid)
        prog = self.progress.get(work.job) if work else None
        if work is None or prog is None:
            return
        work.saving = None
        self._resolve(work, None, (503, {"error": "connection reset: the container stopped while saving"}))
        if c.exit_code == KILL_EXIT_CODE and prog.saves_on_sigterm and prog.step > prog.checkpointed_step \
                and not c.hung and not self._kubelet.crashing(rt, c) and self.collectives.can_save(work.job) \
                and (not rt.deleting or self._kubelet.grace_s(rt.key) >= self._t.checkpoint_save_s):
            # The trainer's SIGTERM handler; once a rank died the step was rolled back: nothing to save. A rank
            # whose GPU failed (fell off the bus, lost its memory: the processes on it are ending) cannot copy
            # its state out, so the job cannot save, however soon the SIGTERM came.
            self.save_now(work.job, requested=False)
            prog.sigterm_checkpoints += 1
        prog.interrupt()
        self.collectives.on_rank_stopped(work.job, rt)

    def absorbs_failure(self, rt: PodRt, c: ContainerRt) -> bool:
        """Kubelet hook: whether the trainer's agent restarts its workers in place instead of exiting."""
        work = self._work.get(rt.uid)
        return work is not None and self.collectives.absorbs(work.job, rt, c)

    # -- protocol ----------------------------------------------------------------------
    def _running(self, pkey: PodKey, uid: str) -> tuple[PodRt, ContainerRt] | None:
        rt = self._kubelet.pods.get(pkey)
        if rt is None or rt.uid != uid or rt.deleting or not rt.containers:
            return None
        c = rt.containers[0]
        return (rt, c) if c.state == "running" else None

    def _check(self, pkey: PodKey, uid: str) -> None:
        pod = self._store.find("pods", *pkey)
        work = self._work.get(uid)
        running = self._running(pkey, uid)
        if pod is None or work is None or running is None or pod["metadata"].get("uid") != uid:
            return
        rt, c = running
        ann = pod["metadata"].get("annotations") or {}
        restart = ann.get(RESTART_REQUEST)
        if restart and restart not in work.handled_restarts:
            work.handled_restarts.add(restart)
            try:
                code = int(ann.get(RESTART_EXIT_CODE, DEFAULT_RESTART_EXIT_CODE))
            except ValueError:
                code = DEFAULT_RESTART_EXIT_CODE
            self._kubelet.exit_container(rt, c, code, "Error")
            return
        request = ann.get(CKPT_REQUEST)
        if (
            request
            and ann.get(CKPT_METHOD) == "annotation"
            and request not in work.answered
            and work.saving is None
            and self.collectives.can_save(work.job)  # a hung job never answers
        ):
            mode, delay = workload_http.answer_mode(ann, self._t.checkpoint_save_s)
            if mode == "never":
                return
            work.saving = request
            gen = c.gen
            self._timers.call_later(
                delay, lambda: self._save(pkey, uid, request, gen, "annotation", mode == "fail")
            )

    def _resolve(self, work: _PodWork, request: str | None, answer: HttpAnswer) -> None:
        """Answer the HTTP requests waiting for ``request`` (``None``: all of them)."""
        for key in [request] if request is not None else list(work.waiters):
            for fut in work.waiters.pop(key, []):
                if not fut.done():
                    fut.set_result(answer)

    def _save(
        self, pkey: PodKey, uid: str, request: str, gen: int, via: str = "annotation", fail: bool = False
    ) -> None:
        work = self._work.get(uid)
        running = self._running(pkey, uid)
        if work is None or work.saving != request:
            return
        work.saving = None
        prog = self.progress.get(work.job)
        if running is None or running[1].gen != gen or prog is None:
            self._timers.call_later(0, lambda: self._check(pkey, uid))
            return
        work.answered.add(request)
        notes: dict[str, str | None]
        if fail:
            error = f"save failed ({CKPT_ANSWER}: fail)"
            self._resolve(work, request, (500, {"request_id": request, "error": error}))
            notes = {CKPT_ACK: request, CKPT_ERROR: error}
        else:
            ckpt_id, location = self.save_now(work.job, requested=True)
            work.answers[request] = (ckpt_id, location)
            self._resolve(work, request, (200, {"request_id": request, "checkpoint_id": ckpt_id,
                                                "location": location}))
            notes = {CKPT_ACK: request, CKPT_ID: ckpt_id, CKPT_LOCATION: location, CKPT_ERROR: None}
        if via != "annotation":
            return

        def ack(p: Obj) -> None:
            mine = p["metadata"].setdefault("annotations", {})
            for k, v in notes.items():
                if v is None:
                    mine.pop(k, None)
                else:
                    mine[k] = v

        try:
            self._store.mutate("pods", pkey[0], pkey[1], ack)
        except NotFound:
            return

    def save_now(self, job: JobKey, requested: bool) -> tuple[str, str]:
        """Record a checkpoint of ``job`` at its current step; returns its id and location."""
        prog = self.progress[job]
        prog.checkpointed_step = prog.step
        prog.checkpoints += 1
        if requested:
            prog.requested_step = prog.step
        prog.last_checkpoint_id = f"{job[1]}-step-{prog.step}"
        return prog.last_checkpoint_id, f"sim://{job[0]}/{job[1]}/step-{prog.step}"

    def rank(self, namespace: str, name: str) -> tuple[JobKey, PodKey]:
        """The training job of a running pod and the pod's key; ``KeyError`` when it is none."""
        rt = self._kubelet.pods.get((namespace, name))
        work = self._work.get(rt.uid) if rt is not None else None
        if rt is None or work is None:
            raise KeyError(f"no running training pod {namespace}/{name}")
        return work.job, rt.key

    def discard_checkpoints(self, job: JobKey, count: int) -> None:
        """The job's last ``count`` periodic checkpoints hold corrupted state (silent data corruption found
        late): its next restart resumes from the one before them."""
        prog, every = self.progress[job], self._config.checkpoint_every_steps
        prog.checkpointed_step = max(0, prog.checkpointed_step - count * every) if every else 0

    def job_of(self, uid: str) -> JobKey | None:
        """The training Job of a pod (by uid), if it is a training pod."""
        work = self._work.get(uid)
        return work.job if work is not None and work.job in self.progress else None

    async def http_checkpoint(self, pkey: PodKey, port: int, path: str, body: Any) -> HttpAnswer:
        """The training script's checkpoint endpoint, reached through the pod proxy."""
        return await workload_http.http_checkpoint(self, pkey, port, path, body)

    # -- progress ----------------------------------------------------------------------
    def _ensure_ticking(self) -> None:
        if not self._ticking:
            self._ticking = True
            self._timers.call_later(self._t.workload_step_s, self._tick)

    def _tick(self) -> None:
        self._timers.call_later(self._t.workload_step_s, self._tick)
        now = self._timers.now()
        saving_jobs = {w.job for w in self._work.values() if w.saving}
        every = self._config.checkpoint_every_steps
        for key, prog in self.progress.items():
            pods = [self._kubelet.pods.get(p) for p in self._pods_of(key)]
            ready = sum(1 for rt in pods if rt is not None and rt.ready() and not self._at_barrier(rt.uid))
            share = self.collectives.step_share(key)
            if ready and ready >= prog.parallelism and key not in saving_jobs and not prog.stalled and share:
                prog.credit += share  # a slow rank: a step in 1/share ticks
                if prog.credit >= 1.0 - 1e-9:
                    prog.credit -= 1.0
                    prog.step += 1
                    if every and prog.step % every == 0:
                        prog.checkpointed_step = prog.step
                        prog.checkpoints += 1
                        prog.last_checkpoint_id = f"{key[1]}-step-{prog.step}"
            values = (prog.step, prog.checkpointed_step, prog.lost_steps)
            if values != prog.written and now - prog.last_write >= self._t.progress_write_s:
                self._write_progress(key, prog, values, now)

    def _write_progress(
        self, key: JobKey, prog: Progress, values: tuple[int, int, int], now: float
    ) -> None:
        def annotate(job: Obj) -> None:
            job["metadata"].setdefault("annotations", {}).update(
                {
                    STEP: str(values[0]),
                    CHECKPOINTED_STEP: str(values[1]),
                    LOST_STEPS: str(values[2]),
                }
            )

        if key not in self._groups.pods:
            try:
                self._store.mutate("jobs", key[0], key[1], annotate)
            except NotFound:
                return
        prog.written, prog.last_write = values, now
        self._report_on_pods(key, values[0])

    def _pods_of(self, key: JobKey) -> set[PodKey]:
        return self._jobs.job_pods.get(key) or self._groups.pods.get(key) or set()

    def _report_on_pods(self, key: JobKey, step: int) -> None:
        """Each running pod of the Job shows the step it reached (``podmedic.io/progress``),
        as a training loop or its sidecar would; podmedic verifies "progressing" on it."""
        for pkey in self._pods_of(key):
            rt = self._kubelet.pods.get(pkey)
            if rt is None or not rt.ready():
                continue

            def annotate(pod: Obj) -> None:
                pod["metadata"].setdefault("annotations", {})[PROGRESS] = str(step)

            try:
                self._store.mutate("pods", pkey[0], pkey[1], annotate)
            except NotFound:
                continue
