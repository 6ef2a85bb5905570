"""One goodput run: a fresh stack, the training Jobs, the seeded faults under one policy, the steps kept.

What a run varies is a ``Setup``: the jobs' shape (single-GPU Jobs, or synchronous multi-node Jobs
shaped like Llama 3's: one 8-GPU pod per node, every rank needed for a step, a trainer that saves
on SIGTERM), how long a broken GPU takes to repair, what a checkpoint costs, and which faults are
announced ahead. ``benchmarks/goodput.py`` runs the policies and seeds; ``goodput_sensitivity.py``
sweeps the setup.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, replace
from typing import Any

import aiohttp

from benchmarks.fleet import Sim
from benchmarks.goodput_faults import (
    BACKOFF_BASE_REAL_S,
    BACKOFF_MAX_REAL_S,
    CHECKPOINT_SAVE_REAL_S,
    GRACE_REAL_S,
    KINDS,
    PULL_REAL_S,
    RESTART_REAL_S,
    WARN_REAL_S,
)
from benchmarks.scaled_policy import shipped_policy_scaled
from benchmarks.settings import BENCH_TIMINGS, DEVICES_PER_NODE, stack_config
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m
from podmedic.kube.gateway import KubeGateway
from podmedic.stack.ingest_agent import run_ingest_and_agent
from podmedic_sim.config import SimTimings
from podmedic_sim.vendors.desk import running_desk

STEP_S = 0.1
CHECKPOINT_EVERY = 50  # the job's own checkpoint: every 5 s of simulated training
SCALE = 60.0  # one simulated second stands for a minute of a real job (GPU-hours are scaled by it)
DRIVER_TAINT = "gpu.nvidia.com/xid"
NON_FATAL_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs NVIDIA's DRA driver calls application-level: their ResourceSlice taint has effect ``None``, which
keeps no pod off the GPU; every other XID's is ``NoSchedule`` (kubernetes-sigs/dra-driver-nvidia-gpu,
docs "GPU health checking", XID errors)."""


@dataclass(frozen=True)
class Setup:
    """What one goodput run is made of, besides the policy and the faults.

    ``warn_share`` ``None`` announces only what a source documents an announcement for (host
    maintenance); a number announces that share of the faults a device reports (maintenance
    included), ``WARN_REAL_S`` ahead, and none of the others.
    """

    jobs: int
    duration_s: float
    pods_per_job: int = 1
    repair_s: float = 15.0
    checkpoint_save_real_s: float = CHECKPOINT_SAVE_REAL_S
    warn_share: float | None = None
    jobset: bool = False  # each job a JobSet of one-pod Jobs, gang-restarted (pods_per_job > 1)

    @property
    def llama3_shape(self) -> bool:
        """Synchronous multi-node Jobs: one pod per node holding all its GPUs, saving on SIGTERM."""
        return self.pods_per_job > 1

    def nodes(self) -> int:
        """Single-GPU Jobs: 4 a node at most (room to move); multi-node Jobs: a node per pod and two spare."""
        if self.llama3_shape:
            return self.jobs * self.pods_per_job + 2
        return max(2, (self.jobs + 3) // 4 + 1)

    def timings(self) -> SimTimings:
        """The simulator's pace with the real costs of ``benchmarks/goodput_faults.py`` scaled by ``SCALE``."""
        update = {"workload_step_s": STEP_S, "progress_write_s": 0.5, "backoff_base_s": BACKOFF_BASE_REAL_S / SCALE,
                  "backoff_max_s": BACKOFF_MAX_REAL_S / SCALE, "container_start_s": RESTART_REAL_S / SCALE,
                  "image_pull_s": PULL_REAL_S / SCALE, "checkpoint_save_s": self.checkpoint_save_real_s / SCALE}
        if self.llama3_shape:  # a SIGTERM save must fit in Kubernetes' default grace period
            update["termination_grace_s"] = GRACE_REAL_S / SCALE
        return BENCH_TIMINGS.model_copy(update=update)

    def with_(self, **changes: Any) -> Setup:
        """A copy with ``changes``."""
        return replace(self, **changes)


@dataclass
class _Run:
    policy: str
    setup: Setup
    sim: Sim
    kube_url: str


async def _cordon_drain(run: _Run, node: str, http: aiohttp.ClientSession, cordon: bool) -> None:
    """The node-level baseline: cordon the node and delete its pods (or uncordon it)."""
    patch = {"spec": {"unschedulable": cordon}}
    async with http.patch(f"{run.kube_url}/api/v1/nodes/{node}", json=patch,
                          headers={"Content-Type": "application/merge-patch+json"}) as answer:
        answer.raise_for_status()
    if not cordon:
        return
    for pod in (await run.sim.state())["pods"]:
        if pod["node"] == node and not pod["deleting"]:
            async with http.delete(f"{run.kube_url}/api/v1/namespaces/{pod['namespace']}/pods/{pod['name']}"):
                pass


def _announced(spec: dict[str, Any], share: float | None, rng: random.Random) -> bool:
    if spec["signal"] == "silent":
        return False
    if share is None:
        return "warn_real_s" in spec
    return rng.random() < share


async def _inject(run: _Run, faults: list[tuple[float, str]], started: float) -> int:
    """Inject the faults at their times; returns how many hit a running job."""
    rng, warn_rng = random.Random(len(faults)), random.Random(f"warn-{faults!r}")
    hit = 0
    async with aiohttp.ClientSession() as http:
        repairs: list[asyncio.Task[None]] = []
        for at, kind in faults:
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            running = [p for p in (await run.sim.state())["pods"] if p.get("job") and p["ready"]]
            if not running:
                continue
            hit += 1
            pod = rng.choice(sorted(running, key=lambda p: p["name"]))
            spec = KINDS[kind]
            if spec["signal"] == "silent":  # the process dies; no device says anything, nobody can act
                await run.sim.post("workloads/crash", {"namespace": pod.get("namespace", "default"),
                                                       "name": pod["name"]})
                continue
            dev = tuple((pod["devices"][0] if len(pod["devices"]) == 1 else rng.choice(pod["devices"])).split("/"))
            if _announced(spec, run.setup.warn_share, warn_rng):
                await run.sim.post("faults/device", {**_device(dev), **_announcement()})
                repairs.append(asyncio.create_task(_fall_over(run, dev, spec, WARN_REAL_S / SCALE)))
            else:
                await _fall_over(run, dev, spec, 0.0)
            if run.policy == "cordon-drain":
                await _cordon_drain(run, pod["node"], http, True)
            repairs.append(asyncio.create_task(_repair(run, http, dev, pod["node"], spec)))
        await asyncio.gather(*repairs)
    return hit


def _device(dev: tuple[str, ...]) -> dict[str, str]:
    return {"driver": dev[0], "pool": dev[1], "device": dev[2]}


def _announcement() -> dict[str, Any]:
    """What an announced fault shows first: Compute Engine's maintenance notice, nothing broken yet."""
    notice = KINDS["host_maintenance"]
    return {"health": "Unhealthy", "reason": notice["reason"], "code": None, "message": notice["message"],
            "crash": False, "clears_on_restart": False}


async def _fall_over(run: _Run, dev: tuple[str, ...], spec: dict[str, Any], after_s: float) -> None:
    """The fault itself, ``after_s`` from now: whatever still runs on the device dies; the driver taints
    a GPU that reports an XID in its ResourceSlice, ``NoSchedule`` (no scheduler places a pod on it) unless
    the XID is an application's (``None``: informational)."""
    await asyncio.sleep(after_s)
    await run.sim.post("faults/device", {
        **_device(dev), "health": "Unhealthy", "reason": spec.get("reason", "XidError"), "code": spec["code"],
        "message": spec["message"], "crash": True, "clears_on_restart": spec["clears_on_restart"]})
    if spec["code"] is not None:
        effect = "None" if spec["code"] in NON_FATAL_XIDS else "NoSchedule"
        await run.sim.post("faults/slice-taint", {**_device(dev), "key": DRIVER_TAINT, "value": str(spec["code"]),
                                                  "effect": effect})


async def _repair(run: _Run, http: aiohttp.ClientSession, dev: tuple[str, ...], node: str,
                  spec: dict[str, Any]) -> None:
    await asyncio.sleep(run.setup.repair_s)
    await run.sim.post("faults/device", {**_device(dev), "health": "Healthy"})
    if spec["code"] is not None:
        await run.sim.post("faults/slice-taint", {**_device(dev), "key": DRIVER_TAINT, "remove": True})
    if run.policy == "cordon-drain":
        await _cordon_drain(run, node, http, False)


async def _all_ranks_ready(sim: Sim, setup: Setup, names: list[str], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        pods = [p for p in (await sim.state())["pods"] if (p.get("jobset") or p.get("job")) in names and p["ready"]]
        if len(pods) >= len(names) * setup.pods_per_job:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(pods)} training pods Ready after {timeout_s:g}s")
        await asyncio.sleep(1.0)


def effective_ratio(steps_kept: int, jobs: int, seconds: float, step_s: float = STEP_S) -> float:
    """Steps kept over the steps ``jobs`` undisturbed jobs make in ``seconds``."""
    ideal = jobs * seconds / step_s
    return round(min(1.0, steps_kept / ideal), 4) if ideal > 0 else 0.0


async def one_run(policy: str, setup: Setup, faults: list[tuple[float, str]]) -> dict[str, Any]:
    """``faults`` under ``policy`` on a fresh stack; returns the steps kept and what they are worth."""
    config = stack_config("tuned", setup.nodes(), timings=setup.timings(), worker=policy == "podmedic",
                          checkpoint_every_steps=CHECKPOINT_EVERY)
    names = [f"train-{i:02d}" for i in range(setup.jobs)]
    shape: dict[str, Any] = {"parallelism": setup.pods_per_job, "devices_per_pod": DEVICES_PER_NODE,
             "checkpoint_on_sigterm": True} if setup.llama3_shape else {}
    if setup.jobset:
        shape["jobset"] = True
    # The repair is the vendor's: under podmedic a GPU that failed for good comes back through its ticket
    # (the desk resolves it when the repair is done), as the shipped policy expects of a vendor.
    async with running_stack(config) as stack, Sim(stack.sim_url) as sim, \
            running_desk(stack.sim_url, setup.repair_s) as (_, ticket_url):
        if setup.jobset:  # a JobSet's pods are its Jobs' (<name>-node-<i>): waited for by the JobSet's name
            await asyncio.gather(*(sim.post("workloads/training", {"name": n, **shape}) for n in names))
        else:
            await sim.start_jobs(names, **shape)
        await _all_ranks_ready(sim, setup, names)
        stop, ingest, kube = asyncio.Event(), None, None
        if policy == "podmedic":
            kube = KubeGateway(stack.kubeconfig)
            ingest = asyncio.create_task(run_ingest_and_agent(
                stack.client, kube, shipped_policy_scaled(SCALE, ticket_url), stack.task_queue, stop, stack.sim_url))
        run = _Run(policy, setup, sim, stack.sim_url)
        before = {j["name"]: j for j in (await sim.state())["jobs"] if j["name"] in names}
        started = time.monotonic()
        hit, _ = await asyncio.gather(_inject(run, faults, started), asyncio.sleep(setup.duration_s))
        await asyncio.sleep(max(0.0, started + setup.duration_s - time.monotonic()))
        elapsed = time.monotonic() - started
        after = {j["name"]: j for j in (await sim.state())["jobs"]}
        stop.set()
        if ingest is not None:
            await ingest
        if kube is not None:
            kube.close()
    kept = sum(after[n]["step"] - before[n]["step"] for n in before)
    lost = sum(after[n]["lost_steps"] - before[n]["lost_steps"] for n in before)
    ratio = effective_ratio(kept, setup.jobs, elapsed)
    gpus = setup.jobs * (setup.pods_per_job * DEVICES_PER_NODE if setup.llama3_shape else 1)
    lost_gpu_s = gpus * elapsed * (1 - ratio)
    per_interruption = lost_gpu_s * SCALE / 60 / hit if hit else 0.0
    return {"policy": policy, "effective_training_ratio": ratio, "steps_kept": kept, "steps_lost": lost,
            "stalled_s": round(lost_gpu_s, 1), "gpu_hours_lost": round(lost_gpu_s * SCALE / 3600, 2),
            "faults_hit": hit, "gpu_min_lost_per_interruption": round(per_interruption, 1),
            "sigterm_checkpoints": sum(after[n].get("sigterm_checkpoints", 0) for n in after),
            "elapsed_s": round(elapsed, 1), "load_1m": load_1m()}
