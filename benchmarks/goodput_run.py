"""One goodput run: a fresh stack, the training jobs, the seeded faults under one policy, the steps kept.

The jobs are synchronous trainers of one 8-GPU pod per node (PyTorch's defaults: a peer's exit takes
every rank down, a hung rank waits for the collective timeout; ``podmedic_sim/collectives.py``), saving
on SIGTERM within the grace period and checkpointing on their own every ``CHECKPOINT_EVERY`` steps:
single-node jobs (one pod) or multi-node JobSets. The policies:

- ``podmedic``: the shipped policy, every wait scaled (``benchmarks/scaled_policy.py``), the ingest's
  watches and the node agent, podmedic's worker;
- ``k8s-only``: nobody remediates; the cluster as 1.35 runs it by default (no DRA device health, so no
  taint keeps a replacement off a broken GPU); ``k8s-only+taints``: with the DRA driver's health taints;
- ``in-job``: what a good training team does without podmedic (torchrun ``--max-restarts``, on top of
  Kubernetes' restarts); ``podmedic+in-job``: the same job with podmedic running;
- ``cordon-drain``: node-level remediation as NVSentinel does it: on a device fault (not on the
  application's XIDs), cordon the node and delete its pods gracefully (the trainer saves on SIGTERM);
  uncordon when the GPU is repaired;
- ``control``: no faults, the ceiling.

The fault model (how each cause shows, what a device sees, its repair): ``benchmarks/goodput_faults.py``.
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
    CAUSES,
    CHECKPOINT_SAVE_REAL_S,
    COLLECTIVE_TIMEOUT_REAL_S,
    GRACE_REAL_S,
    IN_JOB_PER_NODE_REAL_S,
    IN_JOB_RESTART_REAL_S,
    IN_JOB_RESTARTS,
    JOB_BACKOFF_BASE_REAL_S,
    JOB_BACKOFF_MAX_REAL_S,
    KUBELET_BACKOFF_MAX_REAL_S,
    KUBELET_BACKOFF_RESET_REAL_S,
    NODE_MONITOR_GRACE_REAL_S,
    NODE_TOLERATION_REAL_S,
    NVRX_HANG_DETECT_REAL_S,
    PEER_EXIT_REAL_S,
    PULL_REAL_S,
    RELAPSE,
    RELAPSE_AFTER_REAL_S,
    REPAIR_REAL_S,
    SLOW_FACTOR,
    SLOW_REAL_S,
    STARTUP_PER_NODE_REAL_S,
    STARTUP_REAL_S,
)
from benchmarks.goodput_stages import StageSampler
from benchmarks.scaled_policy import shipped_policy_scaled
from benchmarks.settings import BENCH_TIMINGS, DEVICES_PER_NODE, stack_config
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m
from podmedic.kube.gateway import KubeGateway
from podmedic_sim.config import SimTimings
from podmedic_sim.vendors.desk import running_desk
from workers.stack.ingest_agent import run_ingest_and_agent

STEP_S = 0.1
CHECKPOINT_EVERY = 50  # the job's own checkpoint: every 5 s of simulated training (5 real minutes)
SCALE = 60.0  # one simulated second stands for a minute of a real job (GPU-hours are scaled by it)
DRIVER_TAINT = "gpu.nvidia.com/xid"
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs NVIDIA's DRA driver calls the application's (kubernetes-sigs/dra-driver-nvidia-gpu, "GPU health
checking"): no driver taint keeps a pod off the GPU, and NVSentinel-style drains leave them alone."""

POLICIES = ("podmedic", "k8s-only", "k8s-only+taints", "in-job", "podmedic+in-job", "cordon-drain")
CONTROL = "control"
ABLATIONS: dict[str, dict[tuple[str, ...], float]] = {
    "podmedic-no-hang": {("checkpoint", "hang_s"): 0.0},
    "podmedic-no-stall": {("detection", "stall", "after_s"): 0.0},
    "podmedic-no-fail-fast": {("checkpoint", "hang_s"): 0.0, ("detection", "stall", "after_s"): 0.0},
}
"""podmedic with one of its mechanisms switched off, or both halves of failing fast (a policy value set in the
shipped policy's default driver entry), run only when asked (``--policy``): against ``podmedic`` what a
mechanism gives back, seed by seed; against ``podmedic-no-fail-fast`` what each gives switched on alone."""
ABLATION_WORDS = {name: "podmedic with " + ", ".join(f"{'.'.join(path)} {value:g}" for path, value in changes.items())
                  for name, changes in ABLATIONS.items()}
"""Each ablation in words (``podmedic with checkpoint.hang_s 0``), for the help and the tables."""


@dataclass(frozen=True)
class Setup:
    """What one goodput run is made of, besides the policy and the faults: ``jobs`` of ``ranks`` 8-GPU pods
    (a JobSet when ``jobset``), ``duration_s`` simulated seconds, and the knobs the sensitivity sweeps."""

    jobs: int
    duration_s: float
    ranks: int = 1
    jobset: bool = False
    in_place_restart: bool = False  # a JobSet that restarts in place (KEP-467): only a failed pod recreated
    collective_timeout_real_s: float = COLLECTIVE_TIMEOUT_REAL_S
    checkpoint_save_real_s: float = CHECKPOINT_SAVE_REAL_S
    causes: tuple[str, ...] = ()  # only these of Llama 3's causes are drawn (a targeted run); empty: all

    def nodes(self) -> int:
        """A node per rank and two spare."""
        return self.jobs * self.ranks + 2

    def timings(self) -> SimTimings:
        """The simulator's pace with the real costs of ``benchmarks/goodput_faults.py`` scaled by ``SCALE``."""
        return BENCH_TIMINGS.model_copy(update={
            "workload_step_s": STEP_S, "progress_write_s": 0.5, "backoff_base_s": JOB_BACKOFF_BASE_REAL_S / SCALE,
            "backoff_max_s": KUBELET_BACKOFF_MAX_REAL_S / SCALE, "job_backoff_max_s": JOB_BACKOFF_MAX_REAL_S / SCALE,
            "backoff_reset_s": KUBELET_BACKOFF_RESET_REAL_S / SCALE,
            "container_start_s": (STARTUP_REAL_S + STARTUP_PER_NODE_REAL_S * self.ranks) / SCALE,
            "image_pull_s": PULL_REAL_S / SCALE, "checkpoint_save_s": self.checkpoint_save_real_s / SCALE,
            "termination_grace_s": GRACE_REAL_S / SCALE, "node_monitor_grace_s": NODE_MONITOR_GRACE_REAL_S / SCALE,
            "node_toleration_cap_s": NODE_TOLERATION_REAL_S / SCALE})

    def collectives(self, in_job: bool) -> dict[str, float]:
        """The trainer's declared process-group behaviour (``podmedic_sim/collectives.py``), scaled."""
        declared = {"peer_exit_s": PEER_EXIT_REAL_S / SCALE,
                    "collective_timeout_s": self.collective_timeout_real_s / SCALE}
        if in_job:
            declared.update(in_job_restarts=IN_JOB_RESTARTS, hang_detect_s=NVRX_HANG_DETECT_REAL_S / SCALE,
                            in_job_restart_s=(IN_JOB_RESTART_REAL_S + IN_JOB_PER_NODE_REAL_S * self.ranks) / SCALE)
        return declared

    def with_(self, **changes: Any) -> Setup:
        """A copy with ``changes``."""
        return replace(self, **changes)


@dataclass
class _Run:
    policy: str
    setup: Setup
    sim: Sim
    kube_url: str
    http: aiohttp.ClientSession
    sampler: StageSampler

    @property
    def driver_taints(self) -> bool:
        return self.policy == "k8s-only+taints"


async def _cordon(run: _Run, node: str, cordon: bool, drain: bool) -> None:
    """Cordon (or uncordon) ``node``; with ``drain``, delete its pods gracefully (a plain API DELETE)."""
    async with run.http.patch(f"{run.kube_url}/api/v1/nodes/{node}", json={"spec": {"unschedulable": cordon}},
                              headers={"Content-Type": "application/merge-patch+json"}) as answer:
        answer.raise_for_status()
    if not drain:
        return
    for pod in (await run.sim.state())["pods"]:
        if pod["node"] == node and not pod["deleting"] and pod["phase"] in ("Pending", "Running"):
            async with run.http.delete(f"{run.kube_url}/api/v1/namespaces/{pod['namespace']}/pods/{pod['name']}"):
                pass


def _device(dev: tuple[str, ...]) -> dict[str, str]:
    return {"driver": dev[0], "pool": dev[1], "device": dev[2]}


async def _target(run: _Run, rng: random.Random) -> tuple[str, dict[str, Any]] | None:
    """The job and the Ready pod a fault hits: drawn by job and rank, so every policy's same fault picks the
    same job and rank; ``None`` when that rank is not running."""
    job, rank = f"train-{rng.randrange(run.setup.jobs):02d}", rng.randrange(run.setup.ranks)
    pods = sorted((p for p in (await run.sim.state())["pods"]
                   if (p.get("jobset") or p.get("job")) == job and not p["deleting"]), key=lambda p: p["name"])
    pod = pods[rank] if rank < len(pods) else None
    return (job, pod) if pod is not None and pod["ready"] else None


async def _inject(run: _Run, faults: list[tuple[float, str]], started: float,
                  repairs: list[asyncio.Task[None]]) -> dict[str, int]:
    """Inject the faults at their times (their repairs added to ``repairs``); returns how many hit a running
    job, by manifestation."""
    hit: dict[str, int] = {}
    for index, (at, cause) in enumerate(faults):
        rng = random.Random(f"{index}-{at}-{cause}")  # the same draws under every policy
        await asyncio.sleep(max(0.0, started + at - time.monotonic()))
        shows, repair = CAUSES[cause].draw(rng)
        target = await _target(run, rng)
        if target is None:
            continue
        job, pod = target
        hit[shows] = hit.get(shows, 0) + 1
        run.sampler.fault(job, cause)
        dev = tuple(pod["devices"][rng.randrange(len(pod["devices"]))].split("/"))
        await _show(run, cause, shows, job, pod, dev)
        lo, hi = REPAIR_REAL_S[repair]
        after_s = rng.uniform(lo, hi) / SCALE
        relapse = rng.uniform(*RELAPSE_AFTER_REAL_S) / SCALE if rng.random() < RELAPSE.get(repair, 0.0) else None
        repairs.append(asyncio.create_task(_repair(run, cause, repair, dev, pod["node"], after_s, relapse)))
    return hit


async def _show(run: _Run, cause: str, shows: str, job: str, pod: dict[str, Any], dev: tuple[str, ...]) -> None:
    """The fault as the cluster sees it."""
    spec, rank = CAUSES[cause], {"namespace": pod["namespace"], "name": pod["name"]}
    if shows == "planned":  # the team restarts the job: every rank deleted gracefully, saving on SIGTERM
        for other in (await run.sim.state())["pods"]:
            if (other.get("jobset") or other.get("job")) == job and not other["deleting"]:
                async with run.http.delete(f"{run.kube_url}/api/v1/namespaces/{other['namespace']}/pods/"
                                           f"{other['name']}"):
                    pass
        return
    if shows == "slow":
        await run.sim.post("workloads/slow", {**rank, "factor": SLOW_FACTOR, "for_s": SLOW_REAL_S / SCALE})
        return
    if spec.host:  # the node dies with its processes; its pods stay bound until their toleration runs out
        await run.sim.post("faults/node", {"node": pod["node"], "down": True})
        return
    if shows == "hang":
        await run.sim.post("workloads/hang", rank)
    if spec.xid is not None:
        await _device_fails(run, spec.xid, pod["node"], dev)
    elif shows in ("crash", "sdc"):
        await run.sim.post("workloads/crash", {**rank, "corrupted_checkpoints": 1 if shows == "sdc" else 0})


async def _device_fails(run: _Run, xid: int, node: str, dev: tuple[str, ...]) -> None:
    """The device reports ``xid``; a process on it (not a hung one) dies, as new ones will; the driver's
    health taint and a node drain follow where the policy has them."""
    await run.sim.post("faults/device", {
        **_device(dev), "health": "Unhealthy", "reason": "XidError", "code": xid,
        "message": f"XID {xid}", "crash": True, "clears_on_restart": False})
    if run.driver_taints:
        effect = "None" if xid in APPLICATION_XIDS else "NoSchedule"
        await run.sim.post("faults/slice-taint", {**_device(dev), "key": DRIVER_TAINT, "value": str(xid),
                                                  "effect": effect})
    if run.policy == "cordon-drain" and xid not in APPLICATION_XIDS:
        await _cordon(run, node, True, drain=True)


async def _repair(run: _Run, cause: str, repair: str, dev: tuple[str, ...], node: str, after_s: float,
                  relapse_after_s: float | None) -> None:
    """The hardware comes back ``after_s`` later (an RMA never within a run); a reboot restarts the driver's
    plugin, which clears its taints, a reset does not. A repair that did not fix (``relapse_after_s``) fails
    the same way again that much later, and the device then stays broken for the run (its RMA takes days)."""
    spec = CAUSES[cause]
    if repair == "none" and not spec.host and spec.xid is None:
        return
    await asyncio.sleep(after_s)
    if spec.host:
        await run.sim.post("faults/node", {"node": node, "down": False})
    if spec.xid is None:
        return
    await run.sim.post("faults/device", {**_device(dev), "health": "Healthy"})
    if run.driver_taints and repair == "reboot":
        await run.sim.post("faults/slice-taint", {**_device(dev), "key": DRIVER_TAINT, "remove": True})
    if run.policy == "cordon-drain" and spec.xid not in APPLICATION_XIDS:
        await _cordon(run, node, False, drain=False)
    if relapse_after_s is not None:
        await asyncio.sleep(relapse_after_s)
        await run.sampler.fault_on_node(node, f"{cause} again")
        await _device_fails(run, spec.xid, node, dev)


async def _all_ranks_ready(sim: Sim, setup: Setup, names: list[str], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        pods = [p for p in (await sim.state())["pods"] if (p.get("jobset") or p.get("job")) in names and p["ready"]]
        if len(pods) >= len(names) * setup.ranks:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(pods)} training pods Ready after {timeout_s:g}s")
        await asyncio.sleep(1.0)


def effective_ratio(steps_kept: int, jobs: int, seconds: float, step_s: float = STEP_S) -> float:
    """Steps kept over the steps ``jobs`` undisturbed jobs make in ``seconds``."""
    ideal = jobs * seconds / step_s
    return round(min(1.0, steps_kept / ideal), 4) if ideal > 0 else 0.0


async def one_run(policy: str, setup: Setup, faults: list[tuple[float, str]]) -> dict[str, Any]:
    """``faults`` under ``policy`` on a fresh stack; returns the steps kept, what they are worth and where the
    rest went."""
    podmedic, in_job = policy.startswith("podmedic"), policy.endswith("in-job")
    config = stack_config("tuned", setup.nodes(), timings=setup.timings(), worker=podmedic,
                          checkpoint_every_steps=CHECKPOINT_EVERY)
    names = [f"train-{i:02d}" for i in range(setup.jobs)]
    shape: dict[str, Any] = {"parallelism": setup.ranks, "devices_per_pod": DEVICES_PER_NODE,
                             "checkpoint_on_sigterm": True, "collectives": setup.collectives(in_job),
                             "jobset": setup.jobset, "in_place_restart": setup.in_place_restart}
    gpus = setup.ranks * DEVICES_PER_NODE
    async with running_stack(config) as stack, Sim(stack.sim_url) as sim, aiohttp.ClientSession() as http, \
            running_desk(stack.sim_url, REPAIR_REAL_S["reboot"][0] / SCALE) as (_, ticket_url):
        await asyncio.gather(*(sim.post("workloads/training", {"name": n, **shape}) for n in names))
        await _all_ranks_ready(sim, setup, names)
        stop, ingest, kube = asyncio.Event(), None, None
        if podmedic:
            kube = KubeGateway(stack.kubeconfig)
            ingest = asyncio.create_task(run_ingest_and_agent(
                stack.client, kube, shipped_policy_scaled(SCALE, ticket_url, ABLATIONS.get(policy, {})),
                stack.task_queue, stop, stack.sim_url))
        sampler = StageSampler(sim, frozenset(names), setup.ranks, gpus, SCALE)
        run = _Run(policy, setup, sim, stack.sim_url, http, sampler)
        before = {j["name"]: j for j in (await sim.state())["jobs"] if j["name"] in names}
        await sampler.sample()
        sampling = asyncio.create_task(sampler.run(stop))
        started, repairs = time.monotonic(), list[asyncio.Task[None]]()
        hit, _ = await asyncio.gather(_inject(run, faults, started, repairs), asyncio.sleep(setup.duration_s))
        await asyncio.sleep(max(0.0, started + setup.duration_s - time.monotonic()))
        elapsed = time.monotonic() - started
        for pending in repairs:  # what is still broken at the end stays broken (an RMA takes days)
            pending.cancel()
        after = {j["name"]: j for j in (await sim.state())["jobs"]}
        stop.set()
        await sampling
        if ingest is not None:
            await ingest
        if kube is not None:
            kube.close()
    kept = sum(after[n]["step"] - before[n]["step"] for n in before)
    lost = sum(after[n]["lost_steps"] - before[n]["lost_steps"] for n in before)
    ratio = effective_ratio(kept, setup.jobs, elapsed)
    lost_gpu_min = setup.jobs * gpus * elapsed * (1 - ratio) * SCALE / 60
    faults_hit = sum(hit.values())
    return {"policy": policy, "effective_training_ratio": ratio, "steps_kept": kept, "steps_lost": lost,
            "gpu_hours_lost": round(lost_gpu_min / 60, 2), "faults_hit": faults_hit, "hit_by_manifestation": hit,
            "gpu_min_lost_per_interruption": round(lost_gpu_min / faults_hit, 1) if faults_hit else 0.0,
            "lost_work_gpu_min": round(lost * STEP_S * gpus * SCALE / 60, 1),
            "stalled_gpu_min": sampler.gpu_minutes(),
            "sigterm_checkpoints": sum(after[n].get("sigterm_checkpoints", 0) for n in before),
            "elapsed_s": round(elapsed, 1), "load_1m": load_1m()}
