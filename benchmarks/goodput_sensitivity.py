"""``python -m benchmarks goodput-sensitivity``: how far the goodput comparison rests on its chosen values.

Two values of the model move the figures most and have no one right value: the collective timeout
a hung rank's peers wait (PyTorch's default 10 minutes; production teams run 30 to 60, ByteRobust) and
what a checkpoint on request or SIGTERM costs. Each is varied on its own, every other value at the
base setup's, with every policy of ``SENSITIVITY_POLICIES`` on the same seeded faults.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from benchmarks.goodput import interval_h_of, policies_on, shape_words
from benchmarks.goodput_run import Setup
from benchmarks.results import write
from benchmarks.stats import machine

SWEEPS: dict[str, tuple[Any, ...]] = {
    "collective_timeout_real_s": (1800.0,),
    "checkpoint_save_real_s": (0.0, 120.0),
}
"""The values tried besides the base setup's own, by knob (``Setup``'s field names)."""

KNOB_WORDS = {
    "collective_timeout_real_s": "collective (NCCL) timeout (real minutes)",
    "checkpoint_save_real_s": "checkpoint save on request or SIGTERM (real seconds)",
}
SENSITIVITY_POLICIES = ("podmedic", "k8s-only", "in-job")


def value_words(knob: str, value: Any) -> str:
    """A knob's value as the table shows it."""
    if knob == "collective_timeout_real_s":
        return f"{value / 60:g}"
    return f"{value:g}"


async def run_sensitivity(base: Setup, faults: int, seeds: list[int], knobs: list[str],
                          progress: Any = print) -> dict[str, Any]:
    """The base setup, then each knob's other values; returns every point's per-policy summaries."""
    progress(f"[sensitivity] base: {shape_words(base)}, {faults} faults in {base.duration_s:.0f} s per run, "
             f"seeds {seeds}")
    base_point = await policies_on(base, faults, seeds, progress, SENSITIVITY_POLICIES)
    points: dict[str, list[dict[str, Any]]] = {}
    for knob in knobs:
        rows = [{"value": getattr(base, knob), "base": True, **base_point}]
        for value in SWEEPS[knob]:
            found = await policies_on(base.with_(**{knob: value}), faults, seeds, progress, SENSITIVITY_POLICIES)
            rows.append({"value": value, "base": False, **found})
        points[knob] = sorted(rows, key=lambda row: -1.0 if row["value"] is None else float(row["value"]))
    return {"benchmark": "goodput-sensitivity", "machine": machine(), "jobs": base.jobs,
            "ranks": base.ranks, "faults": faults, "seeds": seeds, "duration_s": base.duration_s,
            "interval_h": round(interval_h_of(faults, base.jobs, base.duration_s), 2),
            "base": {knob: getattr(base, knob) for knob in SWEEPS},
            "knobs": points, "description": f"{shape_words(base)}, {faults} faults per run in "
                                           f"{base.duration_s:.0f} s, seeds {seeds[0]}..{seeds[-1]}"}


def sensitivity_rows(knob: str, rows: list[dict[str, Any]]) -> list[list[str]]:
    """One row per value: the value, then per policy its effective training time and GPU-minutes lost."""
    out = []
    for row in rows:
        by_policy = {p["policy"]: p for p in row["policies"]}
        cells = [value_words(knob, row["value"]) + (" (base)" if row["base"] else "")]
        for policy in SENSITIVITY_POLICIES:
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
        lines.append("    " + "".join(f"{h:<40}" for h in ["value", *SENSITIVITY_POLICIES]))
        lines += ["    " + "".join(f"{c:<40}" for c in cells) for cells in sensitivity_rows(knob, rows)]
    return "\n".join(lines)


def run_and_print(jobs: int, faults: int, seed: int, seeds: int, duration_s: float, knobs: list[str],
                  out: Path, ranks: int = 1) -> dict[str, Any]:
    """The command's body."""
    base = Setup(jobs=jobs, duration_s=duration_s, ranks=ranks)
    results = asyncio.run(run_sensitivity(base, faults, list(range(seed, seed + seeds)), knobs))
    print(sensitivity_table(results))
    write(results, out)
    return results
