"""``python -m benchmarks goodput``: how much training survives the Llama 3 fault mix, by remediation policy.

Time-compressed training Jobs (one GPU each, a step every 0.1 s, their own checkpoint every
``CHECKPOINT_EVERY`` steps) run on the simulator for ``duration_s``; the same seeded faults
hit them under each policy, each on a fresh stack:

- **podmedic**: the ingest's pod-status watch and podmedic's worker (checkpoint, taint, restart
  in place or reschedule);
- **k8s-only**: nobody remediates: the Job controller replaces crashed pods, the scheduler may
  put them back on the broken GPU, the job resumes from its own last checkpoint;
- **cordon-drain**: node-level remediation without checkpoint requests (NVSentinel-like): on
  the fault, the node is cordoned and its pods deleted; uncordoned when the GPU is repaired.

Every broken GPU is repaired (set Healthy) ``repair_s`` after its fault, under every policy.
Effective training time = steps kept / steps an undisturbed job makes in the same time.

The rate of faults is what the ratio mostly says: by default each job is interrupted as often
as Llama 3's 16K-GPU job was (419 unexpected interruptions in 54 days: one every 3.1 hours),
the rate at which the published goodput figures (Llama 3 ~90 %, ByteRobust 97 %) were taken;
``--interval-h`` sets another. What one interruption costs (GPU-minutes lost per interruption)
is printed next to the ratio: it is what to compare across rates (it still moves with the draw).
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
from benchmarks.llama3 import LLAMA3_INTERVAL_H, LLAMA3_MIX
from benchmarks.results import write
from benchmarks.settings import BENCH_TIMINGS, bench_policy, stack_config
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m, machine
from podmedic.kube.gateway import KubeGateway
from podmedic.stack.ingest_agent import run_ingest_and_agent

# How each kind shows in the simulator: XID, whether the process dies at once, whether a restart
# cures it, and for faults that warn first, how long until the process dies anyway (``warn_s``):
# HBM3 errors and NVLink errors are reported before the job falls over, maintenance is announced.
KINDS: dict[str, dict[str, Any]] = {
    "faulty_gpu": {"code": 79, "crash": True, "clears_on_restart": False, "message": "XID 79: fallen off the bus"},
    "hbm3": {"code": 48, "crash": False, "clears_on_restart": False, "message": "XID 48: double-bit ECC (HBM3)",
             "warn_s": 3.0},
    "software": {"code": 13, "crash": True, "clears_on_restart": True, "message": "XID 13: graphics exception"},
    "switch_cable": {"code": 74, "crash": False, "clears_on_restart": False, "message": "XID 74: NVLink error",
                     "warn_s": 3.0},
    "host_maintenance": {"code": None, "crash": False, "clears_on_restart": False,
                         "message": "host maintenance scheduled", "reason": "NodeMaintenance", "warn_s": 5.0},
}
POLICIES = ("podmedic", "k8s-only", "cordon-drain")
STEP_S = 0.1
CHECKPOINT_EVERY = 50  # the job's own checkpoint: every 5 s of simulated training
SCALE = 60.0  # one simulated second stands for a minute of a real job (GPU-hours are scaled by it)


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
            driver, pool, device = pod["devices"][0].split("/")
            spec = KINDS[kind]
            await run.sim.post("faults/device", {
                "driver": driver, "pool": pool, "device": device, "health": "Unhealthy",
                "reason": spec.get("reason", "XidError"), "code": spec["code"], "message": spec["message"],
                "crash": spec["crash"], "clears_on_restart": spec["clears_on_restart"]})
            if run.policy == "cordon-drain":
                await _cordon_drain(run, pod["node"], http, True)
            if "warn_s" in spec:
                repairs.append(asyncio.create_task(_fall_over(run, (driver, pool, device), spec)))
            repairs.append(asyncio.create_task(_repair(run, http, (driver, pool, device), pod["node"], repair_s)))
        await asyncio.gather(*repairs)
    return hit


async def _fall_over(run: _Run, dev: tuple[str, str, str], spec: dict[str, Any]) -> None:
    """A warned fault kills whatever still runs on the device once its warning time is up."""
    await asyncio.sleep(spec["warn_s"])
    await run.sim.post("faults/device", {
        "driver": dev[0], "pool": dev[1], "device": dev[2], "health": "Unhealthy",
        "reason": spec.get("reason", "XidError"), "code": spec["code"], "message": spec["message"], "crash": True})


async def _repair(run: _Run, http: aiohttp.ClientSession, dev: tuple[str, str, str], node: str,
                  repair_s: float) -> None:
    await asyncio.sleep(repair_s)
    await run.sim.post("faults/device", {"driver": dev[0], "pool": dev[1], "device": dev[2], "health": "Healthy"})
    if run.policy == "cordon-drain":
        await _cordon_drain(run, node, http, False)


async def _one_policy(policy: str, jobs: int, faults: list[tuple[float, str]], duration_s: float,
                      repair_s: float) -> dict[str, Any]:
    timings = BENCH_TIMINGS.model_copy(update={"workload_step_s": STEP_S, "progress_write_s": 0.5})
    nodes = max(2, (jobs + 3) // 4 + 1)  # 4 jobs a node at most: room to move
    config = stack_config("tuned", nodes, timings=timings, worker=policy == "podmedic",
                          checkpoint_every_steps=CHECKPOINT_EVERY)
    async with running_stack(config) as stack, Sim(stack.sim_url) as sim:
        pods = await sim.start_jobs([f"train-{i:02d}" for i in range(jobs)])
        stop, ingest, kube = asyncio.Event(), None, None
        if policy == "podmedic":
            kube = KubeGateway(stack.kubeconfig)
            ingest = asyncio.create_task(run_ingest_and_agent(stack.client, kube, bench_policy(), stack.task_queue,
                                                              stop, stack.sim_url))
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


async def run_goodput(jobs: int, faults: int, seed: int, duration_s: float, repair_s: float = 15.0,
                      progress: Any = print) -> dict[str, Any]:
    """Every policy on the same faults; returns the figures."""
    interval_h = interval_h_of(faults, jobs, duration_s)
    progress(f"[goodput] {jobs} jobs, {faults} faults in {duration_s:.0f} s each policy: one interruption per job "
             f"every {interval_h:.2f} h (scaled; Llama 3: {LLAMA3_INTERVAL_H:.2f} h)")
    drawn = draw_faults(faults, seed, duration_s)
    out = []
    for policy in POLICIES:
        out.append(await _one_policy(policy, jobs, drawn, duration_s, repair_s))
        progress(f"[goodput] {policy}: {out[-1]['effective_training_ratio'] * 100:.1f} % effective, "
                 f"{out[-1]['gpu_min_lost_per_interruption']:g} GPU-min lost per interruption")
    mix: dict[str, int] = {}
    for _, kind in drawn:
        mix[kind] = mix.get(kind, 0) + 1
    return {"benchmark": "goodput", "machine": machine(), "jobs": jobs, "faults": faults, "seed": seed,
            "duration_s": duration_s, "repair_s": repair_s, "step_s": STEP_S, "checkpoint_every": CHECKPOINT_EVERY,
            "scale": SCALE, "interval_h": round(interval_h, 2), "llama3_interval_h": round(LLAMA3_INTERVAL_H, 2),
            "mix_drawn": mix, "faults_drawn": drawn, "policies": out,
            "description": f"{jobs} single-GPU training Jobs for {duration_s:.0f} s (a step every {STEP_S:g} s, "
                           f"their own checkpoint every {CHECKPOINT_EVERY} steps); {faults} faults drawn "
                           f"(seed {seed}) in the Llama 3 proportions: one interruption per job every "
                           f"{interval_h:.2f} h scaled (Llama 3's job: every {LLAMA3_INTERVAL_H:.2f} h); every "
                           f"broken GPU repaired {repair_s:g} s after its fault. Scaled: 1 simulated s = "
                           f"{SCALE:g} real s."}


def goodput_table(r: dict[str, Any]) -> str:
    """The goodput figures as plain text."""
    lines = [r["description"], f"  mix drawn: {r['mix_drawn']}",
             f"  {'policy':<14}{'effective':>10}{'GPU-h lost':>12}{'min/interr.':>12}{'steps kept':>12}"
             f"{'steps lost':>12}{'load':>6}"]
    lines += [f"  {p['policy']:<14}{p['effective_training_ratio'] * 100:>9.1f}%{p['gpu_hours_lost']:>12.2f}"
              f"{p.get('gpu_min_lost_per_interruption', 0):>12.1f}{p['steps_kept']:>12}{p['steps_lost']:>12}"
              f"{p['load_1m']:>6.1f}" for p in r["policies"]]
    return "\n".join(lines)


def run_and_print(jobs: int, faults: int, seed: int, duration_s: float | None, interval_h: float,
                  out: Path) -> dict[str, Any]:
    """The command's body; without ``duration_s`` it follows from ``interval_h``."""
    if duration_s is None:
        duration_s = duration_for(faults, jobs, interval_h)
    results = asyncio.run(run_goodput(jobs, faults, seed, duration_s))
    print(goodput_table(results))
    write(results, out)
    return results
