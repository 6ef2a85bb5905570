"""The PNG plots of docs/BENCHMARKS.md, drawn from the JSON results (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: no display on a build machine
import matplotlib.pyplot as plt


def _cdf(ax: Any, samples: list[float], label: str) -> None:
    if not samples:
        return
    ordered = sorted(samples)
    ax.step([v / 1000 for v in ordered], [(i + 1) / len(ordered) for i in range(len(ordered))], where="post",
            label=f"{label} (n={len(ordered)})")


def latency(results: dict[str, Any], out: Path) -> Path | None:
    """CDFs of event -> taint and event -> recovered: orchestration per server and the storm."""
    series: list[tuple[str, list[float], list[float]]] = []
    orch = results.get("orchestration")
    for server, run in (orch or {}).get("servers", {}).items():
        s = run["podmedic"].get("samples_ms", {})
        series.append((f"orchestration, {server}", s.get("event_to_taint", []), s.get("event_to_recovered", [])))
    for name, label in (("storm", "storm"), ("storm-node", "storm, node quarantine")):
        storm = results.get(name)
        if storm and "samples_ms" in storm:
            series.append((f"{label}, {storm['server']}", storm["samples_ms"]["event_to_taint"],
                           storm["samples_ms"]["event_to_recovered"]))
    if not series:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for label, taint, recovered in series:
        _cdf(axes[0], taint, label)
        _cdf(axes[1], recovered, label)
    for ax, title in zip(axes, ("event -> DeviceTaintRule", "event -> workload verified recovered"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("seconds")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of incidents")
    axes[0].legend(fontsize=8, loc="lower right")
    return _save(fig, out / "latency-cdf.png")


def throughput(results: dict[str, Any], out: Path) -> Path | None:
    """Bare Temporal workflows/s next to podmedic incidents/s, per server setting."""
    orch = results.get("orchestration")
    if not orch:
        return None
    runs = [(f"{s} server", run) for s, run in orch["servers"].items()]
    packed: dict[str, Any] = results.get("orchestration-packed") or {}
    runs += [(f"{s}, {packed.get('per_node')} per node", run) for s, run in packed.get("servers", {}).items()]
    bare = [run["bare"]["workflows_per_s"] for _, run in runs]
    ours = [run["podmedic"]["incidents_per_s"] for _, run in runs]
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = range(len(runs))
    ax.bar([x - 0.2 for x in xs], bare, 0.4, label="bare Temporal (K no-op activities)")
    ax.bar([x + 0.2 for x in xs], ours, 0.4, label="podmedic incidents (full pipeline)")
    for x, b, o in zip(xs, bare, ours, strict=True):
        ax.text(x + 0.2, o, f"{o / b:.2f}x" if b else "", ha="center", va="bottom")
    ax.set_xticks(list(xs), [label for label, _ in runs], fontsize=8)
    ax.set_ylabel("per second")
    ax.set_title(f"{orch['incidents']} at once, K = {runs[0][1]['activities_per_incident']}")
    ax.legend(fontsize=8)
    return _save(fig, out / "throughput-vs-bare.png")


def goodput(results: dict[str, Any], out: Path) -> Path | None:
    """Effective training time ratio by remediation policy."""
    g = results.get("goodput")
    if not g:
        return None
    names = [p["policy"] for p in g["policies"]]
    ratios = [p["effective_training_ratio"] * 100 for p in g["policies"]]
    errors = [p.get("ci95", 0.0) * 100 for p in g["policies"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    colors = ["tab:green" if n.startswith("podmedic") else "tab:gray" for n in names]
    bars = ax.bar(names, ratios, yerr=errors, capsize=4, color=colors)
    ax.tick_params(axis="x", labelsize=8)
    for bar, value in zip(bars, ratios, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, value, f"{value:.1f}%", ha="center", va="bottom")
    ax.axhline(97, linestyle="--", color="black", linewidth=0.8, label="ByteRobust 97%")
    ax.axhline(90, linestyle=":", color="black", linewidth=0.8, label="Llama 3 ~90%")
    ax.set_ylim(0, 105)
    ax.set_ylabel("effective training time, %")
    ax.set_title(f"{g['jobs']} single-node jobs, {g['faults']} faults a run (Llama 3's causes and rate)")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, out / "goodput-by-policy.png")


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw_all(results: dict[str, Any], out: Path) -> list[Path]:
    """Every plot there are results for; returns the files written."""
    return [p for p in (latency(results, out), throughput(results, out), goodput(results, out)) if p]
