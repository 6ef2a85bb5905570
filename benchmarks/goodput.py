"""``python -m benchmarks goodput``: how much training survives Llama 3's interruptions, by remediation policy.

Synchronous training jobs (8-GPU pods, a node each; single-node jobs or a multi-node JobSet) run on
the simulator for ``duration_s``; the same seeded faults hit them under each policy
(``benchmarks/goodput_run.py``), each run on a fresh stack, for several seeds. The faults are drawn
from Llama 3's causes at Llama 3's rate per job (``benchmarks/goodput_faults.py``, with every
parameter's source). Effective training time (ETTR) = steps kept / steps an undisturbed job makes in
the same time; each policy's figure is the mean over the seeds with its 95 % interval, and podmedic's
difference from each baseline is taken per seed (the same faults) with its own interval. Where the lost
time went is sampled by stage and by cause (``benchmarks/goodput_stages.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.goodput_faults import INTERVAL_H, MIX, PARAMETERS, draw_faults, model_changes
from benchmarks.goodput_run import (
    ABLATIONS,
    CHECKPOINT_EVERY,
    CONTROL,
    POLICIES,
    SCALE,
    STEP_S,
    Setup,
    effective_ratio,
    one_run,
)
from benchmarks.goodput_stages import STAGES
from benchmarks.results import write
from benchmarks.stats import machine, mean_ci95

RUN = (*POLICIES, CONTROL)
"""What a table runs per seed: every policy, and the fault-free control."""
KNOWN = (*RUN, *ABLATIONS)
"""Every policy a table may hold: those it runs, and podmedic's ablations when asked for."""

PAIRS = (("podmedic", "k8s-only"), ("podmedic", "k8s-only+taints"), ("podmedic", "in-job"),
         ("podmedic", "cordon-drain"), ("podmedic+in-job", "in-job"), *(("podmedic", a) for a in ABLATIONS),
         ("podmedic-no-stall", "podmedic-no-fail-fast"), ("podmedic-no-hang", "podmedic-no-fail-fast"))
"""The paired differences reported: (policy, baseline). The last two are each half of failing fast switched on
alone (``checkpoint.hang_s`` alone, the stall window alone) against neither."""
__all__ = ["CHECKPOINT_EVERY", "MIX", "POLICIES", "SCALE", "STEP_S", "Setup", "draw_faults", "duration_for",
           "effective_ratio", "interval_h_of", "run_goodput"]


def duration_for(faults: int, jobs: int, interval_h: float, scale: float = SCALE) -> float:
    """Simulated seconds per job in which ``faults`` interruptions hit ``jobs`` jobs at one per job
    every ``interval_h`` real hours (``scale`` real seconds to a simulated one)."""
    return faults * interval_h * 3600 / scale / jobs if jobs > 0 else 0.0


def interval_h_of(faults: int, jobs: int, duration_s: float, scale: float = SCALE) -> float:
    """The real hours between one job's interruptions that ``faults`` in ``duration_s`` stand for."""
    return jobs * duration_s * scale / 3600 / faults if faults > 0 else float("inf")


def breakdown(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """GPU-minutes lost per interruption by stage (stalled time and the work rolled back) and stalled
    GPU-minutes by cause, over ``runs``."""
    hits = sum(r["faults_hit"] for r in runs) or 1
    stages: dict[str, float] = defaultdict(float)
    causes: dict[str, float] = defaultdict(float)
    for r in runs:
        for cause, by_stage in r["stalled_gpu_min"].items():
            for stage, minutes in by_stage.items():
                stages[stage] += minutes
                causes[cause] += minutes
        stages["lost work"] += r["lost_work_gpu_min"]
    lost = sum(r["gpu_hours_lost"] * 60 for r in runs)
    stages["slow, other"] = max(0.0, lost - sum(stages.values()))
    return {"per_interruption_by_stage": {s: round(stages.get(s, 0.0) / hits, 1)
                                          for s in (*STAGES, "lost work", "slow, other")},
            "stalled_by_cause": {c: round(m, 1) for c, m in sorted(causes.items(), key=lambda kv: -kv[1])}}


def _summary(policy: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    mean, half = mean_ci95([r["effective_training_ratio"] for r in runs])
    per, per_half = mean_ci95([r["gpu_min_lost_per_interruption"] for r in runs if r["faults_hit"]])
    return {"policy": policy, "effective_training_ratio": round(mean, 4), "ci95": round(half, 4),
            "gpu_min_lost_per_interruption": round(per, 1), "gpu_min_ci95": round(per_half, 1),
            "seeds": len(runs), **breakdown(runs), "runs": runs}


def paired(policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pair's ETTR difference per seed (the same faults), mean with its 95 % interval."""
    by = {p["policy"]: {r["seed"]: r["effective_training_ratio"] for r in p["runs"]} for p in policies}
    found = []
    for ours, theirs in PAIRS:
        seeds = sorted(set(by.get(ours, {})) & set(by.get(theirs, {})))
        if not seeds:
            continue
        mean, half = mean_ci95([by[ours][s] - by[theirs][s] for s in seeds])
        found.append({"policy": ours, "baseline": theirs, "difference": round(mean, 4), "ci95": round(half, 4),
                      "seeds": len(seeds)})
    return found


async def policies_on(setup: Setup, faults: int, seeds: list[int], progress: Any = print,
                      policies: tuple[str, ...] = RUN,
                      reused: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """``policies`` on the same faults under ``setup``, for each seed (other policies' runs taken from
    ``reused``); returns every policy's summary, the paired differences and the mix."""
    runs: dict[str, list[dict[str, Any]]] = {p: list((reused or {}).get(p, [])) for p in KNOWN}
    begun, total, done = time.monotonic(), len(seeds) * len(policies), 0
    for seed in seeds:
        drawn = draw_faults(faults, seed, setup.duration_s, setup.causes)
        for policy in policies:
            runs[policy] = [r for r in runs[policy] if r["seed"] != seed]
            result = await one_run(policy, setup, drawn if policy != CONTROL else [])
            runs[policy].append({**result, "seed": seed, "faults_drawn": drawn})
            done += 1
            eta = (time.monotonic() - begun) / done * (total - done)
            progress(f"[goodput] seed {seed} {policy}: {result['effective_training_ratio'] * 100:.1f} % effective "
                     f"({done}/{total}, {time.monotonic() - begun:.0f} s elapsed, ETA {eta:.0f} s)")
    summaries = [_summary(p, sorted(runs[p], key=lambda r: r["seed"])) for p in KNOWN if runs[p]]
    return {"mix_drawn": mix_of(runs), "policies": summaries, "paired": paired(summaries)}


def mix_of(runs: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """How often each cause was drawn over every seed the runs cover, merged ones too (a seed's draw,
    the same for every policy, counted once)."""
    by_seed: dict[int, list[Any]] = {}
    for policy_runs in runs.values():
        for run in policy_runs:
            by_seed.setdefault(run["seed"], run.get("faults_drawn") or [])
    mix: dict[str, int] = {}
    for drawn in by_seed.values():
        for _, kind in drawn:
            mix[kind] = mix.get(kind, 0) + 1
    return mix


SAME_SETUP = ("jobs", "ranks", "jobset", "in_place_restart", "faults", "duration_s", "collective_timeout_real_s",
              "causes")
ABSENT = {"causes": [], "in_place_restart": False}
"""What a result written before a setup field existed measured: every cause, JobSets that recreate their Jobs."""


def reusable(earlier: dict[str, Any], setup: Setup, faults: int, policies: tuple[str, ...],
             seeds: list[int]) -> dict[str, list[dict[str, Any]]]:
    """The runs of an earlier result of the same setup (a policy's runs do not depend on another's: each has
    a stack of its own), less those about to be run again; refuses another setup. Runs of other seeds are
    kept, so a table is measured a few seeds at a time and merged."""
    wanted = {"jobs": setup.jobs, "ranks": setup.ranks, "jobset": setup.jobset,
              "in_place_restart": setup.in_place_restart, "faults": faults,
              "duration_s": setup.duration_s, "collective_timeout_real_s": setup.collective_timeout_real_s,
              "causes": list(setup.causes)}
    differs = [f"{k} {earlier.get(k, ABSENT.get(k))!r} != {v!r}" for k, v in wanted.items()
               if earlier.get(k, ABSENT.get(k)) != v]
    if differs:
        raise ValueError(f"the earlier result is of another setup: {'; '.join(differs)}")
    changed = model_changes(earlier.get("parameters"))
    if changed:
        raise ValueError(f"the earlier result was measured on another model (changed since: {'; '.join(changed)}): "
                         "measure every seed again into a new file")
    return {p["policy"]: [r for r in p["runs"] if not (p["policy"] in policies and r["seed"] in seeds)]
            for p in earlier["policies"]}


def combined(files: list[dict[str, Any]], setup: Setup, faults: int) -> dict[str, Any] | None:
    """One earlier result from several of the same setup and model (each checked as ``reusable`` checks),
    a later file's run of a policy and seed replacing an earlier one's: seeds measured by processes
    side by side, made one table."""
    if not files:
        return None
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for found in files:
        for policy, kept in reusable(found, setup, faults, (), []).items():
            runs.setdefault(policy, {}).update({r["seed"]: r for r in kept})
    return {**files[0], "policies": [{"policy": p, "runs": list(by_seed.values())} for p, by_seed in runs.items()]}


def shape_words(setup: Setup) -> str:
    """The jobs of a setup, in words."""
    restart = ("restartStrategy InPlaceRestart: a failed pod recreated alone, the others restarted in place"
               if setup.in_place_restart else "failurePolicy RestartJobSet")
    what = (f"{setup.jobs} JobSet{'s' if setup.jobs > 1 else ''} of {setup.ranks} one-pod Jobs ({restart})"
            if setup.jobset else
            f"{setup.jobs} {'single-node' if setup.ranks == 1 else f'{setup.ranks}-node'} training Job"
            f"{'s' if setup.jobs > 1 else ''}")
    return (f"{what}, 8 GPUs a node, synchronous (a peer's exit takes every rank down; a hang waits "
            f"{setup.collective_timeout_real_s / 60:g} min for the collective timeout), saving on SIGTERM")


async def run_goodput(setup: Setup, faults: int, seeds: list[int], progress: Any = print,
                      policies: tuple[str, ...] = RUN, earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """``policies`` on the same faults for each seed (with ``earlier``, its runs not run again are kept).
    Returns the figures."""
    interval_h = interval_h_of(faults, setup.jobs, setup.duration_s)
    progress(f"[goodput] {shape_words(setup)}; {faults} faults in {setup.duration_s:.0f} s per run, seeds {seeds}: "
             f"one interruption per job every {interval_h:.2f} h (scaled; Llama 3's: {INTERVAL_H:.2f} h)")
    reused = reusable(earlier, setup, faults, policies, seeds) if earlier is not None else None
    found = await policies_on(setup, faults, seeds, progress, policies=policies, reused=reused)
    all_seeds = sorted({r["seed"] for p in found["policies"] for r in p["runs"]})
    return {"benchmark": "goodput", "machine": machine(), "jobs": setup.jobs, "ranks": setup.ranks,
            "jobset": setup.jobset, "in_place_restart": setup.in_place_restart, "faults": faults, "seeds": all_seeds,
            "duration_s": setup.duration_s,
            "collective_timeout_real_s": setup.collective_timeout_real_s, "causes": list(setup.causes),
            "step_s": STEP_S,
            "checkpoint_every": CHECKPOINT_EVERY, "scale": SCALE, "interval_h": round(interval_h, 2),
            "llama3_interval_h": round(INTERVAL_H, 2), "parameters": [list(p) for p in PARAMETERS],
            **found,
            "description": f"{shape_words(setup)}, for {setup.duration_s:.0f} s per run (a step every {STEP_S:g} s, "
                           f"their own checkpoint every {CHECKPOINT_EVERY} steps); {faults} faults per run drawn "
                           f"from Llama 3's causes, "
                           + (f"only {', '.join(setup.causes)} (a targeted run)" if setup.causes else
                              "planned ones included")
                           + f", seeds {all_seeds}: one interruption per "
                           f"job every {interval_h:.2f} h (Llama 3's rate: every {INTERVAL_H:.2f} h). Scaled: 1 "
                           f"simulated s = {SCALE:g} real s."}


def goodput_table(r: dict[str, Any]) -> str:
    """The goodput figures as plain text."""
    lines = [r["description"], f"  mix drawn: {r['mix_drawn']}",
             f"  {'policy':<17}{'ETTR (95% CI)':>18}{'GPU-min/interr.':>20}{'seeds':>7}"]
    lines += [f"  {p['policy']:<17}{p['effective_training_ratio'] * 100:>9.1f}% ± {p['ci95'] * 100:<5.1f}"
              f"{p['gpu_min_lost_per_interruption']:>12.1f} ± {p['gpu_min_ci95']:<5.1f}{p['seeds']:>7}"
              for p in r["policies"]]
    lines += [f"  {d['policy']} - {d['baseline']}: {d['difference'] * 100:+.1f} ± {d['ci95'] * 100:.1f} points "
              f"({d['seeds']} seeds)" for d in r["paired"]]
    lines += [f"  {p['policy']}: lost per interruption by stage {p['per_interruption_by_stage']}"
              for p in r["policies"]]
    return "\n".join(lines)


def run_and_print(jobs: int, faults: int, seed: int, seeds: int, duration_s: float | None, interval_h: float,
                  out: Path, ranks: int = 1, policies: tuple[str, ...] = RUN, merge: bool = False,
                  jobset: bool = False, collective_timeout_real_s: float = 600.0,
                  merge_from: tuple[Path, ...] = (), causes: tuple[str, ...] = (),
                  in_place_restart: bool = False) -> dict[str, Any]:
    """The command's body: seeds ``seed`` .. ``seed + seeds - 1`` (none: only merge); without ``duration_s``
    it follows from ``interval_h``; ``merge`` keeps the other runs of ``out`` (same setup) and adds these,
    as ``merge_from`` does the runs of other files."""
    if duration_s is None:
        duration_s = duration_for(faults, jobs, interval_h)
    if jobset and ranks < 2:
        raise SystemExit("goodput: --jobset needs --ranks 2 or more (a JobSet of one-pod Jobs, a node each)")
    if in_place_restart and not jobset:
        raise SystemExit("goodput: --in-place-restart needs --jobset (it is the JobSet's restart strategy)")
    setup = Setup(jobs=jobs, duration_s=duration_s, ranks=ranks, jobset=jobset, in_place_restart=in_place_restart,
                  collective_timeout_real_s=collective_timeout_real_s, causes=causes)
    files = [json.loads(out.read_text())] if merge and out.exists() else []
    files += [json.loads(other.read_text()) for other in merge_from]
    results = asyncio.run(run_goodput(setup, faults, list(range(seed, seed + seeds)), policies=policies,
                                      earlier=combined(files, setup, faults)))
    print(goodput_table(results))
    write(results, out)
    return results
