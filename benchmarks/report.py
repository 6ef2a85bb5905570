"""``python -m benchmarks report``: run every published benchmark, then regenerate docs/BENCHMARKS.md and its plots.

One command, in one go, printing progress as it goes: the lead re-runs it on a quiet machine.
The doc's hand-written method notes live between the NOTES markers and are kept as they are.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.results import RESULTS, read

DOC = Path("docs/BENCHMARKS.md")
IMG = Path("docs/img")
NOTES_BEGIN, NOTES_END = "<!-- BEGIN NOTES (hand-written, kept by the generator) -->", "<!-- END NOTES -->"

NCCL_POLICIES = ["--policy", "podmedic", "--policy", "podmedic-no-stall", "--policy", "k8s-only", "--policy", "in-job"]
"""The policies of the targeted run of hangs no device reports."""
IN_PLACE_POLICIES = ["--policy", "podmedic", "--policy", "k8s-only", "--policy", "k8s-only+taints"]
"""The policies of the in-place JobSet table: podmedic, and the two baselines that do or do not see a device."""

# (name, arguments after `python -m benchmarks`), full size and --quick. The JSON goes to RESULTS/<name>.json.
RUNS: dict[str, list[str]] = {
    # 100, not the command's 500: the default server (SQLite syncing every write) ran 300 bare
    # workflows of 13 activities at 0.8/s on this shared machine, so 500 on both servers alone would
    # take most of an hour; storm is the 1,000-incident run (tuned server).
    "orchestration": ["orchestration", "--incidents", "100"],
    # The same incidents 8 to a node: every node is a node incident too (node_correlation).
    "orchestration-packed": ["orchestration", "--incidents", "100", "--per-node", "8", "--servers", "tuned"],
    "single": ["single", "--incidents", "10"],
    "cost": ["cost", "--incidents", "200", "--runs", "3"],  # one run's CPU ratio swings by a quarter: the median of 3
    "storm": ["storm", "--nodes", "125"],
    "storm-node": ["storm", "--nodes", "125", "--node-quarantine"],
    # The hall-wide event: the fences, then every incident closed through the storm's turns (about
    # 45 minutes on this machine after the events; the wait is the limit, not the expected time).
    "storm-10k": ["storm", "--nodes", "1250", "--wait-s", "5400"],
    # The same two against a shared API server: the worker held to the manifests' 50 QPS, burst 100, and the
    # simulator's APF budget a little above (429 with Retry-After past it).
    "storm-qps": ["storm", "--nodes", "125", "--kube-qps", "50"],
    "storm-10k-qps": ["storm", "--nodes", "1250", "--kube-qps", "50", "--wait-s", "7200"],
    # The same 1,000 devices failing for good with the guard as it ships: the trip, and NoExecute at once.
    "storm-guard": ["storm-guard", "--nodes", "125"],
    # 4 single-node jobs, 4 faults at Llama 3's rate (one per job every 2.78 h): 167 s per run, 6 policies x 8 seeds.
    "goodput": ["goodput"],
    # 2 JobSets of 4 nodes x 8 GPUs, 2 faults at the same rate per job: 167 s per run.
    "goodput-jobset": ["goodput", "--jobs", "2", "--ranks", "4", "--jobset", "--faults", "2"],
    # The same JobSets under NCCL watchdog timeouts alone (a hang no device reports): what the stall window
    # gives back, against its ablation and the baselines that see no device either.
    "goodput-jobset-nccl": ["goodput", "--jobs", "2", "--ranks", "4", "--jobset", "--faults", "2", "--cause",
                            "nccl_watchdog", "--seeds", "4", *NCCL_POLICIES],
    # The same JobSets restarting in place (KEP-467): a failed pod recreated alone, the others restarted in place.
    "goodput-jobset-inplace": ["goodput", "--jobs", "2", "--ranks", "4", "--jobset", "--in-place-restart", "--faults",
                               "2", *IN_PLACE_POLICIES],
    "goodput-sensitivity": ["goodput-sensitivity", "--seeds", "1"],
    "memory": ["memory", "--incidents", "1000", "--nodes", "10000"],
}
QUICK: dict[str, list[str]] = {
    "orchestration": ["orchestration", "--incidents", "10"],
    "orchestration-packed": ["orchestration", "--incidents", "10", "--per-node", "8", "--servers", "tuned"],
    "single": ["single", "--incidents", "3"],
    "cost": ["cost", "--incidents", "5"],
    "storm": ["storm", "--nodes", "4"],
    "storm-node": ["storm", "--nodes", "4", "--node-quarantine"],
    "storm-10k": ["storm", "--nodes", "8", "--wait-s", "60"],  # 64 devices: past the storm fence's 50
    "storm-qps": ["storm", "--nodes", "4", "--kube-qps", "50"],
    "storm-10k-qps": ["storm", "--nodes", "8", "--kube-qps", "50", "--wait-s", "60"],
    "storm-guard": ["storm-guard", "--nodes", "2", "--observe-s", "3"],
    "goodput": ["goodput", "--jobs", "2", "--faults", "2", "--duration-s", "20", "--seeds", "2"],
    "goodput-jobset": ["goodput", "--jobs", "1", "--ranks", "2", "--jobset", "--faults", "1", "--duration-s", "10",
                       "--seeds", "1"],
    "goodput-jobset-nccl": ["goodput", "--jobs", "1", "--ranks", "2", "--jobset", "--faults", "1", "--duration-s", "10",
                            "--cause", "nccl_watchdog", "--seeds", "1", *NCCL_POLICIES],
    "goodput-jobset-inplace": ["goodput", "--jobs", "1", "--ranks", "2", "--jobset", "--in-place-restart", "--faults",
                               "1", "--duration-s", "10", "--seeds", "1", *IN_PLACE_POLICIES],
    "goodput-sensitivity": ["goodput-sensitivity", "--jobs", "2", "--faults", "2", "--duration-s", "10", "--seeds",
                            "1", "--knob", "collective_timeout_real_s"],
    "memory": ["memory", "--incidents", "20", "--nodes", "100"],
}


def regenerate(quick: bool = False, only_docs: bool = False) -> Path:
    """Run the benchmarks (unless ``only_docs``) and write the doc; ``quick`` writes under RESULTS/quick."""
    from benchmarks.cli import main

    results_dir, doc, img = (RESULTS / "quick", RESULTS / "quick/BENCHMARKS.md", RESULTS / "quick/img") \
        if quick else (RESULTS, DOC, IMG)
    runs = QUICK if quick else RUNS
    started = time.monotonic()
    if not only_docs:
        for i, (name, argv) in enumerate(runs.items(), 1):
            elapsed = time.monotonic() - started
            print(f"== [{i}/{len(runs)}] python -m benchmarks {' '.join(argv)}  ({elapsed:.0f} s so far)", flush=True)
            main([*argv, "--json", str(results_dir / f"{name}.json")])
        from benchmarks.results import write
        from benchmarks.stats import machine

        write({"took_s": round(time.monotonic() - started), "machine_at_end": machine()}, results_dir / "report.json")
    results = {name: found for name in [*runs, "report"] if (found := read(results_dir / f"{name}.json")) is not None}
    from benchmarks.plots import draw_all
    from benchmarks.report_doc import render

    plots = draw_all(results, img)
    doc.parent.mkdir(parents=True, exist_ok=True)
    notes = _notes(doc if doc.exists() else DOC)
    doc.write_text(render(results, runs, plots, doc.parent, notes))
    print(f"== wrote {doc} and {len(plots)} plot(s) under {img} in {time.monotonic() - started:.0f} s", flush=True)
    return doc


def _notes(doc: Path) -> str:
    """The hand-written part of an existing doc (empty when there is none)."""
    if not doc.exists():
        return ""
    text = doc.read_text()
    if NOTES_BEGIN not in text or NOTES_END not in text:
        return ""
    return text.split(NOTES_BEGIN, 1)[1].split(NOTES_END, 1)[0].strip("\n")


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
