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
(NoSchedule; ``None`` for the XIDs NVIDIA's driver calls the application's), so no scheduler puts a pod
back on a broken GPU (health-aware placement for every baseline).
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
import json
import random
from pathlib import Path
from typing import Any

from benchmarks.goodput_faults import (
    BACKOFF_BASE_REAL_S,
    BACKOFF_MAX_REAL_S,
    GRACE_REAL_S,
    PULL_REAL_S,
    RESTART_REAL_S,
)
from benchmarks.goodput_run import CHECKPOINT_EVERY, SCALE, STEP_S, Setup, effective_ratio, one_run
from benchmarks.llama3 import LLAMA3_INTERVAL_H, LLAMA3_MIX
from benchmarks.results import write
from benchmarks.stats import machine, mean_ci95

POLICIES = ("podmedic", "k8s-only", "cordon-drain")
CONTROL = "control"
__all__ = ["CHECKPOINT_EVERY", "LLAMA3_MIX", "SCALE", "STEP_S", "Setup", "draw_faults", "duration_for",
           "effective_ratio", "interval_h_of", "run_goodput"]


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


def _summary(policy: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    mean, half = mean_ci95([r["effective_training_ratio"] for r in runs])
    per, per_half = mean_ci95([r["gpu_min_lost_per_interruption"] for r in runs if r["faults_hit"]])
    return {"policy": policy, "effective_training_ratio": round(mean, 4), "ci95": round(half, 4),
            "gpu_min_lost_per_interruption": round(per, 1), "gpu_min_ci95": round(per_half, 1),
            "seeds": len(runs), "runs": runs}


async def policies_on(setup: Setup, faults: int, seeds: list[int], progress: Any = print,
                      label: str = "goodput", policies: tuple[str, ...] = POLICIES,
                      reused: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """``policies`` on the same faults under ``setup``, for each seed (the others' runs taken from
    ``reused``); returns every policy's summary and the mix."""
    runs: dict[str, list[dict[str, Any]]] = {p: list((reused or {}).get(p, [])) for p in POLICIES}
    mix: dict[str, int] = {}
    for seed in seeds:
        drawn = draw_faults(faults, seed, setup.duration_s)
        for _, kind in drawn:
            mix[kind] = mix.get(kind, 0) + 1
        for policy in policies:
            result = await one_run(policy, setup, drawn)
            runs[policy].append({**result, "seed": seed, "faults_drawn": drawn})
            progress(f"[{label}] seed {seed} {policy}: {result['effective_training_ratio'] * 100:.1f} % effective")
    return {"mix_drawn": mix, "policies": [_summary(p, runs[p]) for p in POLICIES]}


SAME_SETUP = ("jobs", "pods_per_job", "faults", "seeds", "duration_s", "repair_s")


def reusable(earlier: dict[str, Any], setup: Setup, faults: int, seeds: list[int],
             policies: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    """The runs of the policies not re-run, from an earlier result of the same setup and seeds (a
    policy's runs do not depend on another's: each has a stack of its own); refuses another setup."""
    wanted = {"jobs": setup.jobs, "pods_per_job": setup.pods_per_job, "faults": faults, "seeds": seeds,
              "duration_s": setup.duration_s, "repair_s": setup.repair_s, "jobset": setup.jobset}
    absent = {"pods_per_job": 1, "jobset": False}
    differs = [f"{k} {earlier.get(k, absent.get(k))!r} != {v!r}" for k, v in wanted.items()
               if earlier.get(k, absent.get(k)) != v]
    if differs:
        raise ValueError(f"the earlier result is of another setup: {'; '.join(differs)}")
    return {p["policy"]: p["runs"] for p in earlier["policies"] if p["policy"] not in policies}


def shape_words(setup: Setup) -> str:
    """The jobs of a setup, in words."""
    if setup.jobset:
        return (f"{setup.jobs} training JobSet{'s' if setup.jobs > 1 else ''} of {setup.pods_per_job} one-pod Jobs "
                f"of 8 GPUs (a node each, every "
                f"rank needed for a step; backoffLimit 0 and failurePolicy RestartJobSet: one failed pod restarts "
                f"every Job; the trainer saving on SIGTERM within the {GRACE_REAL_S:g} s grace period)")
    if setup.llama3_shape:
        return (f"{setup.jobs} synchronous training Jobs shaped like Llama 3's ({setup.pods_per_job} pods of 8 GPUs, "
                f"a node each, every rank needed for a step, the trainer saving on SIGTERM within the "
                f"{GRACE_REAL_S:g} s grace period)")
    return f"{setup.jobs} single-GPU training Jobs"


async def run_goodput(setup: Setup, faults: int, seeds: list[int], progress: Any = print,
                      policies: tuple[str, ...] = POLICIES, earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """``policies`` on the same faults, for each seed, and one fault-free control; with ``earlier``, the
    other policies' runs and the control are taken from it. Returns the figures."""
    jobs, duration_s = setup.jobs, setup.duration_s
    interval_h = interval_h_of(faults, jobs, duration_s)
    progress(f"[goodput] {shape_words(setup)}, {faults} faults in {duration_s:.0f} s per run, seeds {seeds}: one "
             f"interruption per job every {interval_h:.2f} h (scaled; Llama 3: {LLAMA3_INTERVAL_H:.2f} h)")
    reused = reusable(earlier, setup, faults, seeds, policies) if earlier is not None else None
    control = earlier["control"] if earlier is not None else await one_run(CONTROL, setup, [])
    progress(f"[goodput] control (no faults): {control['effective_training_ratio'] * 100:.1f} % effective")
    found = await policies_on(setup, faults, seeds, progress, policies=policies, reused=reused)
    if earlier is not None:
        found["reused"] = {"measured": earlier["machine"]["when"], "policies": [*sorted(reused or {}), "control"]}
    return {"benchmark": "goodput", "machine": machine(), "jobs": jobs, "pods_per_job": setup.pods_per_job,
            **({"jobset": True} if setup.jobset else {}),
            "faults": faults, "seeds": seeds, "duration_s": duration_s, "repair_s": setup.repair_s,
            "step_s": STEP_S, "checkpoint_every": CHECKPOINT_EVERY,
            "scale": SCALE, "interval_h": round(interval_h, 2), "llama3_interval_h": round(LLAMA3_INTERVAL_H, 2),
            "costs_real_s": {"backoff_base": BACKOFF_BASE_REAL_S, "backoff_max": BACKOFF_MAX_REAL_S,
                             "restart_startup_assumed": RESTART_REAL_S, "image_pull_assumed": PULL_REAL_S,
                             "checkpoint_save_assumed": setup.checkpoint_save_real_s,
                             **({"termination_grace": GRACE_REAL_S} if setup.llama3_shape else {})},
            "control": control, **found,
            "description": f"{shape_words(setup)} for {duration_s:.0f} s per run (a step every "
                           f"{STEP_S:g} s, their own checkpoint every {CHECKPOINT_EVERY} steps); {faults} faults "
                           f"per run drawn from the whole Llama 3 cause table, seeds {seeds[0]}..{seeds[-1]}: one "
                           f"interruption per job every {interval_h:.2f} h scaled (Llama 3's job: every "
                           f"{LLAMA3_INTERVAL_H:.2f} h); every broken GPU repaired {setup.repair_s:g} s after its "
                           f"fault. Scaled: 1 simulated s = {SCALE:g} real s."}


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
                  out: Path, pods_per_job: int = 1, policies: tuple[str, ...] = POLICIES,
                  reuse: Path | None = None, jobset: bool = False) -> dict[str, Any]:
    """The command's body: seeds ``seed`` .. ``seed + seeds - 1``; without ``duration_s`` it follows from
    ``interval_h``; ``reuse`` takes the runs of the policies not named, and the control, from that file."""
    if duration_s is None:
        duration_s = duration_for(faults, jobs, interval_h)
    if jobset and pods_per_job < 2:
        raise SystemExit("goodput: --jobset needs --pods-per-job 2 or more (a JobSet of one-pod Jobs, a node each)")
    setup = Setup(jobs=jobs, duration_s=duration_s, pods_per_job=pods_per_job, jobset=jobset)
    earlier = json.loads(reuse.read_text()) if reuse is not None else None
    results = asyncio.run(run_goodput(setup, faults, list(range(seed, seed + seeds)), policies=policies,
                                      earlier=earlier))
    print(goodput_table(results))
    write(results, out)
    return results
