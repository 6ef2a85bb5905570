"""The arithmetic every benchmark shares: percentiles, ratios, rates, and the machine they ran on."""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
from pathlib import Path


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of ``values``: the smallest value with at least
    ``p`` % of the values at or below it; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    # ceil, not round(x + 0.5): Python rounds halves to even, which made p99 of 100 values the max.
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


def summary(values: list[float], digits: int = 1) -> dict[str, float]:
    """p50, p99 and max of ``values``, rounded to ``digits``."""
    return {"p50": round(percentile(values, 50), digits), "p99": round(percentile(values, 99), digits),
            "max": round(max(values, default=0.0), digits)}


def rate(count: int, seconds: float) -> float:
    """``count`` per second over ``seconds``; 0 when no time passed."""
    return round(count / seconds, 2) if seconds > 0 else 0.0


def ratio(ours: float, baseline: float) -> float:
    """``ours / baseline`` to three places; 0 when there is no baseline."""
    return round(ours / baseline, 3) if baseline > 0 else 0.0


def machine() -> dict[str, object]:
    """What the figures were measured on: CPU model, cores, memory, load, date."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"cpu": model or platform.processor(), "cpus": os.cpu_count(), "memory_gib": mem_gib,
            "python": platform.python_version(), "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def load_1m() -> float:
    """The 1-minute load average now (recorded next to every figure: the machine is shared)."""
    return round(os.getloadavg()[0], 2)


# Two-sided 95 % critical values of Student's t by degrees of freedom (1..30); beyond, the normal 1.96.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def mean_ci95(values: list[float]) -> tuple[float, float]:
    """The mean of ``values`` and the half-width of its 95 % confidence interval (Student's t, sample
    standard deviation); the half-width is 0 for fewer than two values."""
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    df = len(values) - 1
    t = _T95[df - 1] if df <= len(_T95) else 1.96
    return mean, t * sd / math.sqrt(len(values))
