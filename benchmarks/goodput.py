"""``python -m benchmarks goodput``: how much training survives the Llama 3 fault mix, by remediation policy.

Time-compressed training Jobs (one GPU each, a step every 0.1 s, their own checkpoint every
``CHECKPOINT_EVERY`` steps) run on the simulator for ``duration_s``; the same seeded faults
hit them under each policy, each on a fresh stack, for several seeds:

- **podmedic**: the shipped policy (fleet guard and node quarantine on; only its waits compressed),
  the ingest's watches and the node agent, podmedic's worker;
- **k8s-only**: nobody remediates: the Job controller replaces crashed pods with its back-off, the
  job resumes from its own last checkpoint;
- **cordon-drain**: node-level remediation without checkpoint requests (NVSentinel-like): on a fault
  it can see, the node is cordoned and its pods deleted; uncordoned when the GPU is repaired;
- **control**: no faults at all: the ceiling the others are measured against.

Every policy runs on the same cluster: its DRA driver taints a failed GPU in its ResourceSlice
(NoSchedule), so no scheduler puts a pod back on it (health-aware placement for every baseline).
The faults, their signals and costs: ``benchmarks/goodput_faults.py``. Every broken GPU is repaired
(set Healthy) ``repair_s`` after its fault. Effective training time = steps kept / steps an
undisturbed job makes in the same time. Each policy's figure is the mean over the seeds with its
95 % confidence interval.

The rate of faults is what the ratio mostly says: by default each job is interrupted as often
as Llama 3's 16K-GPU job was (419 unexpected interruptions in 54 days: one every 3.1 hours),
the rate at which the published goodput figures (Llama 3 ~90 %, ByteRobust 97 %) were taken;
``--interval-h`` sets another.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.fleet import Sim
from benchmarks.goodput_faults import (
    BACKOFF_BASE_REAL_S,
    BACKOFF_MAX_REAL_S,
    CHECKPOINT_SAVE_REAL_S,
    KINDS,
    PULL_REAL_S,
    RESTART_REAL_S,
)
from benchmarks.llama3 import LLAMA3_INTERVAL_H, LLAMA3_MIX
from benchmarks.results import write
from benchmarks.settings import BENCH_TIMINGS, shipped_policy_compressed, stack_config
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m, machine, mean_ci95
from podmedic.kube.gateway import KubeGateway
from podmedic.stack.ingest_agent import run_ingest_and_agent

POLICIES = ("podmedic", "k8s-only", "cordon-drain")
CONTROL = "control"
STEP_S = 0.1
CHECKPOINT_EVERY = 50  # the job's own checkpoint: every 5 s of simulated training
SCALE = 60.0  # one simulated second stands for a minute of a real job (GPU-hours are scaled by it)
DRIVER_TAINT = "gpu.nvidia.com/xid"


def draw_faults(count: int, seed: int, duration_s: float) -> list[tuple[float, str]]:
    """``count`` (time, kind) pairs: kinds in the Llama 3 proportions, times spread over the middle of the run."""
    rng = random.Random(seed)
    kinds = rng.choices(list(LLAMA3_MIX), weights=list(LLAMA3_MIX.values()), k=count)
    times = sorted(rng.uniform(0.1 * duration_s, 0.7 * duration_s) for _ in range(count))
    return list(zip(times, kinds, strict=True))


def duration_for(faults: int, jobs: int, interval_h: float, scale: float = SCALE) -> float:
    """Simulated seconds per job in which ``faults`` interruptions hit ``jobs`` jobs at one per job
    every ``interval_h`` real hours (``scale`` real seconds to a simulated one)."""
    return faults * interval_h * 3600 / scale / jobs if jobs > 0 else 0.0


def interval_h_of(faults: int, jobs: int, duration_s: float, scale: float = SCALE) -> float:
    """The real hours between one job's interruptions that ``faults`` in ``duration_s`` stand for."""
    return jobs * duration_s * scale / 3600 / faults if faults > 0 else float("inf")


def effective_ratio(steps_kept: int, jobs: int, seconds: float, step_s: float = STEP_S) -> float:
    """Steps kept over the steps ``jobs`` undisturbed jobs make in ``seconds``."""
    ideal = jobs * seconds / step_s
    return round(min(1.0, steps_kept / ideal), 4) if ideal > 0 else 0.0


@dataclass
class _Run:
    policy: str
    sim: Sim
    kube_url: str
    pods: dict[str, dict[str, Any]]


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


async def _inject(run: _Run, faults: list[tuple[float, str]], repair_s: float, started: float) -> int:
    """Inject the faults at their times; returns how many hit a running job."""
    rng = random.Random(len(faults))
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
            dev = tuple(pod["devices"][0].split("/"))
            await run.sim.post("faults/device", {
                "driver": dev[0], "pool": dev[1], "device": dev[2], "health": "Unhealthy",
                "reason": spec.get("reason", "XidError"), "code": spec["code"], "message": spec["message"],
                "crash": spec["crash"], "clears_on_restart": spec["clears_on_restart"]})
            if spec["code"] is not None:  # the driver taints its failed GPU: no scheduler places a pod on it
                await run.sim.post("faults/slice-taint", {"driver": dev[0], "pool": dev[1], "device": dev[2],
                                                          "key": DRIVER_TAINT, "value": str(spec["code"]),
                                                          "effect": "NoSchedule"})
            if run.policy == "cordon-drain":
                await _cordon_drain(run, pod["node"], http, True)
            if "warn_real_s" in spec:
                repairs.append(asyncio.create_task(_fall_over(run, dev, spec)))
            repairs.append(asyncio.create_task(_repair(run, http, dev, pod["node"], repair_s, spec)))
        await asyncio.gather(*repairs)
    return hit


async def _fall_over(run: _Run, dev: tuple[str, ...], spec: dict[str, Any]) -> None:
    """An announced fault kills whatever still runs on the device once its notice is up."""
    await asyncio.sleep(spec["warn_real_s"] / SCALE)
    await run.sim.post("faults/device", {
        "driver": dev[0], "pool": dev[1], "device": dev[2], "health": "Unhealthy",
        "reason": spec.get("reason", "XidError"), "code": spec["code"], "message": spec["message"], "crash": True})


async def _repair(run: _Run, http: aiohttp.ClientSession, dev: tuple[str, ...], node: str,
                  repair_s: float, spec: dict[str, Any]) -> None:
    await asyncio.sleep(repair_s)
    await run.sim.post("faults/device", {"driver": dev[0], "pool": dev[1], "device": dev[2], "health": "Healthy"})
    if spec["code"] is not None:
        await run.sim.post("faults/slice-taint", {"driver": dev[0], "pool": dev[1], "device": dev[2],
                                                  "key": DRIVER_TAINT, "remove": True})
    if run.policy == "cordon-drain":
        await _cordon_drain(run, node, http, False)


GOODPUT_TIMINGS = BENCH_TIMINGS.model_copy(update={
    "workload_step_s": STEP_S, "progress_write_s": 0.5, "backoff_base_s": BACKOFF_BASE_REAL_S / SCALE,
    "backoff_max_s": BACKOFF_MAX_REAL_S / SCALE, "container_start_s": RESTART_REAL_S / SCALE,
    "image_pull_s": PULL_REAL_S / SCALE, "checkpoint_save_s": CHECKPOINT_SAVE_REAL_S / SCALE})
"""The simulator's pace, with the costs of ``benchmarks/goodput_faults.py`` scaled down by ``SCALE``."""


async def _one_policy(policy: str, jobs: int, faults: list[tuple[float, str]], duration_s: float,
                      repair_s: float) -> dict[str, Any]:
    nodes = max(2, (jobs + 3) // 4 + 1)  # 4 jobs a node at most: room to move
    config = stack_config("tuned", nodes, timings=GOODPUT_TIMINGS, worker=policy == "podmedic",
                          checkpoint_every_steps=CHECKPOINT_EVERY)
    async with running_stack(config) as stack, Sim(stack.sim_url) as sim:
        pods = await sim.start_jobs([f"train-{i:02d}" for i in range(jobs)])
        stop, ingest, kube = asyncio.Event(), None, None
        if policy == "podmedic":
            kube = KubeGateway(stack.kubeconfig)
            ingest = asyncio.create_task(run_ingest_and_agent(stack.client, kube, shipped_policy_compressed(),
                                                              stack.task_queue, stop, stack.sim_url))
        run = _Run(policy, sim, stack.sim_url, pods)
        before = {j["name"]: j for j in (await sim.state())["jobs"]}
        started = time.monotonic()
        hit, _ = await asyncio.gather(_inject(run, faults, repair_s, started), asyncio.sleep(duration_s))
        await asyncio.sleep(max(0.0, started + duration_s - time.monotonic()))
        elapsed = time.monotonic() - started
        after = {j["name"]: j for j in (await sim.state())["jobs"]}
        stop.set()
        if ingest is not None:
            await ingest
        if kube is not None:
            kube.close()
    kept = sum(after[n]["step"] - before[n]["step"] for n in before)
    lost = sum(after[n]["lost_steps"] - before[n]["lost_steps"] for n in before)
    ratio = effective_ratio(kept, jobs, elapsed)
    lost_gpu_s = jobs * elapsed * (1 - ratio)
    per_interruption = lost_gpu_s * SCALE / 60 / hit if hit else 0.0
    return {"policy": policy, "effective_training_ratio": ratio, "steps_kept": kept, "steps_lost": lost,
            "stalled_s": round(lost_gpu_s, 1), "gpu_hours_lost": round(lost_gpu_s * SCALE / 3600, 2),
            "faults_hit": hit, "gpu_min_lost_per_interruption": round(per_interruption, 1),
            "elapsed_s": round(elapsed, 1), "load_1m": load_1m()}


def _summary(policy: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    mean, half = mean_ci95([r["effective_training_ratio"] for r in runs])
    per, per_half = mean_ci95([r["gpu_min_lost_per_interruption"] for r in runs if r["faults_hit"]])
    return {"policy": policy, "effective_training_ratio": round(mean, 4), "ci95": round(half, 4),
            "gpu_min_lost_per_interruption": round(per, 1), "gpu_min_ci95": round(per_half, 1),
            "seeds": len(runs), "runs": runs}


async def run_goodput(jobs: int, faults: int, seeds: list[int], duration_s: float, repair_s: float = 15.0,
                      progress: Any = print) -> dict[str, Any]:
    """Every policy on the same faults, for each seed, and one fault-free control; returns the figures."""
    interval_h = interval_h_of(faults, jobs, duration_s)
    progress(f"[goodput] {jobs} jobs, {faults} faults in {duration_s:.0f} s per run, seeds {seeds}: one "
             f"interruption per job every {interval_h:.2f} h (scaled; Llama 3: {LLAMA3_INTERVAL_H:.2f} h)")
    control = await _one_policy(CONTROL, jobs, [], duration_s, repair_s)
    progress(f"[goodput] control (no faults): {control['effective_training_ratio'] * 100:.1f} % effective")
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    mix: dict[str, int] = {}
    for seed in seeds:
        drawn = draw_faults(faults, seed, duration_s)
        for _, kind in drawn:
            mix[kind] = mix.get(kind, 0) + 1
        for policy in POLICIES:
            result = await _one_policy(policy, jobs, drawn, duration_s, repair_s)
            runs[policy].append({**result, "seed": seed, "faults_drawn": drawn})
            progress(f"[goodput] seed {seed} {policy}: {result['effective_training_ratio'] * 100:.1f} % effective")
    return {"benchmark": "goodput", "machine": machine(), "jobs": jobs, "faults": faults, "seeds": seeds,
            "duration_s": duration_s, "repair_s": repair_s, "step_s": STEP_S, "checkpoint_every": CHECKPOINT_EVERY,
            "scale": SCALE, "interval_h": round(interval_h, 2), "llama3_interval_h": round(LLAMA3_INTERVAL_H, 2),
            "costs_real_s": {"backoff_base": BACKOFF_BASE_REAL_S, "backoff_max": BACKOFF_MAX_REAL_S,
                             "restart_startup_assumed": RESTART_REAL_S, "image_pull_assumed": PULL_REAL_S,
                             "checkpoint_save_assumed": CHECKPOINT_SAVE_REAL_S},
            "mix_drawn": mix, "control": control, "policies": [_summary(p, runs[p]) for p in POLICIES],
            "description": f"{jobs} single-GPU training Jobs for {duration_s:.0f} s per run (a step every "
                           f"{STEP_S:g} s, their own checkpoint every {CHECKPOINT_EVERY} steps); {faults} faults "
                           f"per run drawn from the whole Llama 3 cause table, seeds {seeds[0]}..{seeds[-1]}: one "
                           f"interruption per job every {interval_h:.2f} h scaled (Llama 3's job: every "
                           f"{LLAMA3_INTERVAL_H:.2f} h); every broken GPU repaired {repair_s:g} s after its fault. "
                           f"Scaled: 1 simulated s = {SCALE:g} real s."}


def goodput_table(r: dict[str, Any]) -> str:
    """The goodput figures as plain text: per policy the mean over the seeds with its 95 % interval."""
    c = r["control"]
    lines = [r["description"], f"  mix drawn (all seeds): {r['mix_drawn']}",
             f"  {'policy':<14}{'effective (95% CI)':>22}{'GPU-min lost/interr.':>24}{'seeds':>7}",
             f"  {'control':<14}{c['effective_training_ratio'] * 100:>11.1f}% (no faults){'':>24}{1:>7}"]
    lines += [f"  {p['policy']:<14}{p['effective_training_ratio'] * 100:>11.1f}% ± {p['ci95'] * 100:<5.1f}"
              f"{p['gpu_min_lost_per_interruption']:>17.1f} ± {p['gpu_min_ci95']:<5.1f}{p['seeds']:>7}"
              for p in r["policies"]]
    return "\n".join(lines)


def run_and_print(jobs: int, faults: int, seed: int, seeds: int, duration_s: float | None, interval_h: float,
                  out: Path) -> dict[str, Any]:
    """The command's body: seeds ``seed`` .. ``seed + seeds - 1``; without ``duration_s`` it follows from
    ``interval_h``."""
    if duration_s is None:
        duration_s = duration_for(faults, jobs, interval_h)
    results = asyncio.run(run_goodput(jobs, faults, list(range(seed, seed + seeds)), duration_s))
    print(goodput_table(results))
    write(results, out)
    return results
