"""Where a goodput run's GPU time went: each job sampled through the simulator's state.

Every ``SAMPLE_S`` the sampler reads ``GET /sim/v1/state`` and gives each training job's interval to
one stage: ``training`` when its step moved on, else what holds it, read from its pods and its
collective state (``podmedic_sim/collectives.py``):

- ``hung``: a rank is stuck and nobody has ended it (waiting for the collective timeout or a remedy);
- ``in-job restart``: the trainer's agent is restarting its workers in place;
- ``node lost``: a rank's pod is still bound to a node that died (until its toleration of the
  unreachable taint runs out: 300 s by default);
- ``termination``: a rank's pod is Terminating (its grace period; one on a dead node holds nothing, for
  its controller has replaced it);
- ``back-off``: a rank is missing (its controller waits out the Job back-off) or in CrashLoopBackOff;
- ``scheduling``: a rank's pod is bound to no node;
- ``start-up``: a rank's pod is bound and not Ready (image, container start) or every rank is Ready
  and no step moves (the trainer's start-up, a checkpoint save, a hang nobody reported).

Steps rolled back are ``lost work``; the rest of what a run lost (steps made slower than undisturbed
ones: a slow rank) is ``slow``. Each stalled interval is charged to the cause of the job's latest fault.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from benchmarks.fleet import Sim

SAMPLE_S = 0.25
STAGES = ("hung", "in-job restart", "node lost", "termination", "back-off", "scheduling", "start-up")


def stage_of(job: dict[str, Any], pods: list[dict[str, Any]], ranks: int) -> str:
    """The stage that holds a job whose step did not move."""
    if job.get("hung_ranks"):
        return "hung"
    if job.get("restarting_in_job"):
        return "in-job restart"
    if any(p.get("node_down") and not p["deleting"] for p in pods):
        return "node lost"
    if any(p["deleting"] and not p.get("node_down") for p in pods):
        return "termination"
    live = [p for p in pods if p["phase"] in ("Pending", "Running") and not p["deleting"]]
    if len(live) < ranks or any(p.get("waiting") == "CrashLoopBackOff" for p in live):
        return "back-off"
    if any(not p["node"] for p in live):
        return "scheduling"
    return "start-up"


@dataclass
class StageSampler:
    """Samples the training jobs ``names`` of ``ranks`` pods; ``gpus`` per job, ``scale`` real seconds to a
    simulated one."""

    sim: Sim
    names: frozenset[str]
    ranks: int
    gpus: int
    scale: float
    last_cause: dict[str, str] = field(default_factory=dict)
    stalled_s: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    _steps: dict[str, int] = field(default_factory=dict)

    async def fault_on_node(self, node: str, cause: str) -> None:
        """A fault hit whichever training job has a rank on ``node`` now (if any)."""
        for pod in (await self.sim.state())["pods"]:
            owner = pod.get("jobset") or pod.get("job")
            if pod["node"] == node and owner in self.names and not pod["deleting"]:
                self.fault(owner, cause)
                return

    def fault(self, job: str, cause: str) -> None:
        """A fault hit ``job``: what stalls it from now on is charged to ``cause``."""
        self.last_cause[job] = cause

    async def run(self, stop: asyncio.Event) -> None:
        """Sample until ``stop`` is set."""
        while not stop.is_set():
            await self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_S)

    async def sample(self) -> None:
        """Charge one interval of each training job."""
        state = await self.sim.state()
        by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for pod in state["pods"]:
            owner = pod.get("jobset") or pod.get("job")
            if owner:
                by_job[owner].append(pod)
        for job in state["jobs"]:
            name = job["name"]
            if name not in self.names or not job.get("training"):
                continue
            before, self._steps[name] = self._steps.get(name), int(job["step"])
            if before is None or job["step"] > before:
                continue
            stage = stage_of(job, by_job.get(name, []), self.ranks)
            self.stalled_s[self.last_cause.get(name, "before any fault")][stage] += SAMPLE_S

    def gpu_minutes(self) -> dict[str, dict[str, float]]:
        """Stalled GPU-minutes by cause and stage (real minutes)."""
        per = self.gpus * self.scale / 60
        return {cause: {stage: round(s * per, 1) for stage, s in stages.items()}
                for cause, stages in self.stalled_s.items()}
