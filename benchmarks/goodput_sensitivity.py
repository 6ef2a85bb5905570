"""``python -m benchmarks goodput-sensitivity``: how far the goodput comparison rests on its assumptions.

Three assumptions of ``python -m benchmarks goodput`` move the figures most, and none of them has one
right value: how long a broken GPU takes to be repaired (the cordon-and-drain baseline holds the
whole node that long), how many faults are announced ahead (only host maintenance is, by a documented
notice; a fleet with failure prediction would announce more), and what a checkpoint costs (podmedic
asks for one before it acts, a SIGTERM handler makes one inside the grace period). Each is varied
on its own, every other value at the base setup's, with every policy on the same seeded faults.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from benchmarks.goodput import POLICIES, interval_h_of, policies_on, shape_words
from benchmarks.goodput_run import SCALE, Setup
from benchmarks.results import write
from benchmarks.stats import machine

SWEEPS: dict[str, tuple[Any, ...]] = {
    "repair_s": (5.0, 60.0),
    "warn_share": (0.0, 0.5),
    "checkpoint_save_real_s": (0.0, 120.0),
}
"""The values tried besides the base setup's own, by knob (``Setup``'s field names)."""

KNOB_WORDS = {
    "repair_s": "repair time after a fault (real minutes)",
    "warn_share": "faults announced 1 h ahead (share of those a device reports)",
    "checkpoint_save_real_s": "checkpoint save on request or SIGTERM (real seconds)",
}


def value_words(knob: str, value: Any) -> str:
    """A knob's value as the table shows it."""
    if knob == "warn_share":
        return "host maintenance only (documented)" if value is None else f"{value * 100:.0f} %"
    if knob == "repair_s":
        return f"{value * SCALE / 60:g}"
    return f"{value:g}"


async def run_sensitivity(base: Setup, faults: int, seeds: list[int], knobs: list[str],
                          progress: Any = print) -> dict[str, Any]:
    """The base setup, then each knob's other values; returns every point's per-policy summaries."""
    progress(f"[sensitivity] base: {shape_words(base)}, {faults} faults in {base.duration_s:.0f} s per run, "
             f"seeds {seeds}")
    base_point = await policies_on(base, faults, seeds, progress, "sensitivity base")
    points: dict[str, list[dict[str, Any]]] = {}
    for knob in knobs:
        rows = [{"value": getattr(base, knob), "base": True, **base_point}]
        for value in SWEEPS[knob]:
            found = await policies_on(base.with_(**{knob: value}), faults, seeds, progress,
                                      f"sensitivity {knob}={value}")
            rows.append({"value": value, "base": False, **found})
        points[knob] = sorted(rows, key=lambda row: -1.0 if row["value"] is None else float(row["value"]))
    return {"benchmark": "goodput-sensitivity", "machine": machine(), "jobs": base.jobs,
            "pods_per_job": base.pods_per_job, "faults": faults, "seeds": seeds, "duration_s": base.duration_s,
            "interval_h": round(interval_h_of(faults, base.jobs, base.duration_s), 2),
            "base": {"repair_s": base.repair_s, "warn_share": base.warn_share,
                     "checkpoint_save_real_s": base.checkpoint_save_real_s},
            "knobs": points, "description": f"{shape_words(base)}, {faults} faults per run in "
                                           f"{base.duration_s:.0f} s, seeds {seeds[0]}..{seeds[-1]}"}


def sensitivity_rows(knob: str, rows: list[dict[str, Any]]) -> list[list[str]]:
    """One row per value: the value, then per policy its effective training time and GPU-minutes lost."""
    out = []
    for row in rows:
        by_policy = {p["policy"]: p for p in row["policies"]}
        cells = [value_words(knob, row["value"]) + (" (base)" if row["base"] else "")]
        for policy in POLICIES:
            p = by_policy[policy]
            ci = f" ± {p['ci95'] * 100:.1f}" if p.get("seeds", 2) > 1 else ""  # one seed: no interval
            lost = p["gpu_min_lost_per_interruption"]
            cells.append(f"{p['effective_training_ratio'] * 100:.1f} %{ci} ({lost:.0f} min)")
        out.append(cells)
    return out


def sensitivity_table(r: dict[str, Any]) -> str:
    """The sweeps as plain text."""
    lines = [f"goodput sensitivity: {r['description']}; effective training time, mean ± 95 % CI "
             f"(GPU-minutes lost per interruption)"]
    for knob, rows in r["knobs"].items():
        lines.append(f"  {KNOB_WORDS[knob]}")
        lines.append("    " + "".join(f"{h:<40}" for h in ["value", *POLICIES]))
        lines += ["    " + "".join(f"{c:<40}" for c in cells) for cells in sensitivity_rows(knob, rows)]
    return "\n".join(lines)


def run_and_print(jobs: int, faults: int, seed: int, seeds: int, duration_s: float, knobs: list[str],
                  out: Path, pods_per_job: int = 1) -> dict[str, Any]:
    """The command's body."""
    base = Setup(jobs=jobs, duration_s=duration_s, pods_per_job=pods_per_job)
    results = asyncio.run(run_sensitivity(base, faults, list(range(seed, seed + seeds)), knobs))
    print(sensitivity_table(results))
    write(results, out)
    return results
