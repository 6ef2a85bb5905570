"""How the ranks of a synchronous training job fail together: the trainer's collective model.

A synchronous data-parallel step needs every rank, so one rank's trouble is every rank's:

- **A rank's process exits** (a crash, a restart, its pod deleted): the others' next collective
  fails as the transport sees the peer gone, and PyTorch's ``TORCH_NCCL_ASYNC_ERROR_HANDLING=3`` (its
  default) tears each process down: every other rank's trainer exits ``peer_exit_s`` later.
- **A rank hangs** (stuck in a CUDA call on a failed GPU or link: Llama 3, arXiv 2407.21783 section
  3.3.4, "stalled load/store operations"): its pod stays Running and Ready, no rank makes a step, no
  checkpoint can be taken, SIGTERM is not handled, and when the process group's collective timeout
  fires (``init_process_group(timeout=)``, 10 minutes by default for NCCL) every rank's watchdog aborts
  its process.
- **A rank is slow** (thermal throttling, a degraded link): every step takes as long as the slowest
  rank's.
- **In-job restarts** (torchrun ``--max-restarts``): a worker's failure is caught by the agent in its
  container, which restarts the workers of every rank (rendezvous, checkpoint load) in
  ``in_job_restart_s`` while restarts remain; only then does the container exit. torchrun's agent
  cannot see a hung worker: a hang still waits for the collective timeout.
- **Hang detection in the job** (NVIDIA Resiliency Extension's rank heartbeats, ``hang_detect_s``): a
  rank whose heartbeats stop that long is ended (SIGKILL) and the workers restarted as after a failure.

The trainer declares these in its pod template's annotations (``configure``); a job that declares
none keeps its ranks apart (each waits for the others without failing), as a trainer with an endless
timeout would. Exit code 134 is SIGABRT, the watchdog's ``std::abort``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from podmedic_sim.kubelet import Kubelet
from podmedic_sim.kubelet_status import ContainerRt, PodKey, PodRt
from podmedic_sim.timers import Timers
from podmedic_sim.workload_protocol import Progress

ABORT_EXIT_CODE = 134
PEER_EXIT_S = "sim.podmedic.io/peer-exit-s"
COLLECTIVE_TIMEOUT_S = "sim.podmedic.io/collective-timeout-s"
IN_JOB_RESTARTS = "sim.podmedic.io/in-job-restarts"
IN_JOB_RESTART_S = "sim.podmedic.io/in-job-restart-s"
HANG_DETECT_S = "sim.podmedic.io/hang-detect-s"
JobKey = tuple[str, str]


@dataclass
class GroupState:
    """What the collective model keeps of one training job."""

    peer_exit_s: float | None = None
    collective_timeout_s: float | None = None
    in_job_restarts: int = 0
    in_job_restart_s: float = 0.0
    hang_detect_s: float | None = None
    hung: set[PodKey] = field(default_factory=set)
    slow: dict[PodKey, tuple[float, float]] = field(default_factory=dict)  # factor, until (timers clock)
    paused_until: float = 0.0
    restarts_used: dict[str, int] = field(default_factory=dict)  # by pod uid (torchrun counts per agent)
    epoch: int = 0  # bumps when every rank is torn down; stale timers compare it


def _number(annotations: dict[str, str], key: str) -> float | None:
    try:
        return float(annotations[key]) if key in annotations else None
    except ValueError:
        return None


class Collectives:
    """The collective model of every training job (``Workloads`` calls it)."""

    def __init__(self, timers: Timers, kubelet: Kubelet, pods_of: Callable[[JobKey], set[PodKey]],
                 progress: dict[JobKey, Progress]) -> None:
        self._timers = timers
        self._kubelet = kubelet
        self._pods_of = pods_of
        self._progress = progress
        self.groups: dict[JobKey, GroupState] = {}
        self._aborting = False  # the ranks this model tears down do not count as peers that exited

    def configure(self, job: JobKey, annotations: dict[str, str]) -> None:
        """Read the trainer's declared timeouts and restarts from a pod's annotations (its template's)."""
        group = self.groups.setdefault(job, GroupState())
        group.peer_exit_s = _number(annotations, PEER_EXIT_S)
        group.collective_timeout_s = _number(annotations, COLLECTIVE_TIMEOUT_S)
        group.in_job_restarts = int(_number(annotations, IN_JOB_RESTARTS) or 0)
        group.in_job_restart_s = _number(annotations, IN_JOB_RESTART_S) or 0.0
        group.hang_detect_s = _number(annotations, HANG_DETECT_S)

    # -- faults --------------------------------------------------------------------------------
    def hang(self, job: JobKey, pkey: PodKey) -> None:
        """Rank ``pkey``'s process hangs; its peers abort when the collective timeout fires."""
        rt = self._kubelet.pods.get(pkey)
        if rt is None or not rt.containers or rt.containers[0].state != "running":
            raise KeyError(f"no running training pod {pkey[0]}/{pkey[1]}")
        group = self.groups.setdefault(job, GroupState())
        rt.containers[0].hung = True
        group.hung.add(pkey)
        epoch = group.epoch
        for after in (group.collective_timeout_s, group.hang_detect_s):  # the first to fire ends the hang
            if after is not None:
                self._timers.call_later(after, lambda: self._timed_out(job, epoch))

    def slow(self, job: JobKey, pkey: PodKey, factor: float, for_s: float) -> None:
        """Rank ``pkey`` steps ``factor`` times slower for ``for_s`` seconds."""
        if pkey not in self._pods_of(job):
            raise KeyError(f"no training pod {pkey[0]}/{pkey[1]}")
        self.groups.setdefault(job, GroupState()).slow[pkey] = (factor, self._timers.now() + for_s)

    def _timed_out(self, job: JobKey, epoch: int) -> None:
        group = self.groups.get(job)
        if group is not None and group.epoch == epoch and group.hung:
            self._abort(job, group, self._members(job, except_uid=""))

    # -- a rank stopped --------------------------------------------------------------------------
    def on_rank_stopped(self, job: JobKey, rt: PodRt) -> None:
        """A rank's trainer exited: the peers it was training with follow ``peer_exit_s`` later (when the
        trainer declares it); a rank started since never joined their communicator and goes on."""
        group = self.groups.get(job)
        if group is None:
            return
        group.hung.discard(rt.key)
        if group.peer_exit_s is None or self._aborting:
            return
        epoch, members = group.epoch, self._members(job, except_uid=rt.uid)
        self._timers.call_later(group.peer_exit_s, lambda: self._peer_gone(job, epoch, members))

    def _peer_gone(self, job: JobKey, epoch: int, members: list[tuple[PodRt, ContainerRt, int]]) -> None:
        group = self.groups.get(job)
        if group is not None and group.epoch == epoch:
            self._abort(job, group, members)

    def _members(self, job: JobKey, except_uid: str) -> list[tuple[PodRt, ContainerRt, int]]:
        """The ranks training now (their process, by container generation)."""
        found = []
        for pkey in sorted(self._pods_of(job)):
            rt = self._kubelet.pods.get(pkey)
            if rt is not None and rt.uid != except_uid and not rt.deleting and rt.containers \
                    and rt.containers[0].state == "running":
                found.append((rt, rt.containers[0], rt.containers[0].gen))
        return found

    def _abort(self, job: JobKey, group: GroupState, members: list[tuple[PodRt, ContainerRt, int]]) -> None:
        """Each member's process is torn down (or, with restarts left, its workers restarted in place)."""
        group.epoch += 1
        group.hung.clear()
        self._aborting = True
        try:
            for rt, c, gen in members:
                if c.gen != gen or c.state != "running" or rt.deleting or rt.gone:
                    continue  # already gone or restarted: not in the old communicator
                c.hung = False
                if not self.absorbs(job, rt, c):
                    self._kubelet.exit_container(rt, c, ABORT_EXIT_CODE, "Error")
        finally:
            self._aborting = False

    def absorbs(self, job: JobKey, rt: PodRt, c: ContainerRt) -> bool:
        """Whether the agent in ``c`` restarts its workers instead of letting the container exit: one of
        its in-job restarts, every rank paused ``in_job_restart_s`` and rolled back to its checkpoint."""
        group = self.groups.get(job)
        if group is None or c.hung:
            return False
        used = group.restarts_used.get(rt.uid, 0)
        if used >= group.in_job_restarts:
            return False
        group.restarts_used[rt.uid] = used + 1
        now, prog = self._timers.now(), self._progress.get(job)
        if prog is not None and now >= group.paused_until:  # one rollback for the group's restart
            prog.interrupt()
        group.paused_until = max(group.paused_until, now + group.in_job_restart_s)
        gen = c.gen
        self._timers.call_later(group.in_job_restart_s, lambda: self._kubelet.rearm_crash(rt, c, gen))
        return True

    # -- progress ------------------------------------------------------------------------------
    def step_share(self, job: JobKey) -> float:
        """The part of a step the job makes in one tick: 0 while a rank hangs or the workers restart, else
        one over the slowest rank's slowdown."""
        group = self.groups.get(job)
        if group is None:
            return 1.0
        now = self._timers.now()
        if group.hung or now < group.paused_until:
            return 0.0
        group.slow = {k: v for k, v in group.slow.items() if v[1] > now}
        return 1.0 / max((f for f, _ in group.slow.values()), default=1.0)

    def status(self, job: JobKey) -> dict[str, int | bool]:
        """What ``GET /sim/v1/state`` shows of a job: ranks hung, workers restarting in place."""
        group = self.groups.get(job)
        if group is None:
            return {"hung_ranks": 0, "restarting_in_job": False}
        return {"hung_ranks": len(group.hung), "restarting_in_job": self._timers.now() < group.paused_until}

    def can_save(self, job: JobKey) -> bool:
        """A checkpoint needs every rank in step: none while one hangs."""
        group = self.groups.get(job)
        return group is None or not group.hung
