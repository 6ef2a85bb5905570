"""The Markdown of docs/BENCHMARKS.md, from the benchmarks' JSON (the generated part)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.api_budget import budget_line
from benchmarks.cost import runs_line, sweeps_cell
from benchmarks.orchestration import per_node_words
from benchmarks.report import NOTES_BEGIN, NOTES_END, table


def _machine(results: dict[str, Any]) -> str:
    m = next((r["machine"] for r in results.values() if "machine" in r), None)
    if not m:
        return "no results yet"
    return (f"{m['cpu']}, {m['cpus']} CPUs, {m['memory_gib']} GiB, Python {m['python']}; "
            f"load average at the first result's end {m['load_average']}; measured {m['when']}")


def _took(results: dict[str, Any]) -> list[str]:
    r = results.get("report")
    if not r:
        return []
    m = r["machine_at_end"]
    return [f"**Last full regeneration** took {r['took_s'] / 60:.1f} minutes, ending {m['when']} with load average "
            f"{m['load_average']}.", ""]


def _orchestration(r: dict[str, Any]) -> list[str]:
    rows = []
    for server, run in r["servers"].items():
        p = run["podmedic"]
        rows.append([server, run["activities_per_incident"], run["bare"]["workflows_per_s"], p["incidents_per_s"],
                     f"**{run['ratio_to_bare']:.2f}**" + (f" ({run['ratio_min']:.2f} to {run['ratio_max']:.2f})"
                                                          if "ratio_min" in run else ""),
                     f"{p['event_to_taint_ms']['p50']:.0f} / "
                     f"{p['event_to_taint_ms']['p99']:.0f}", f"{p['event_to_recovered_ms']['p50']:.0f} / "
                     f"{p['event_to_recovered_ms']['p99']:.0f}", p["outcomes"], p["load_1m"],
                     ", ".join(f"{k} {v}" for k, v in p["cpu_s"].items())])
    rounds = r.get("rounds", 1)
    how = (f" {rounds} rounds, bare and podmedic alternating on failing devices of their own: the ratio is the "
           "rounds' median (lowest to highest beside it), the row's other figures the median round's."
           if rounds > 1 else " One round (the bare half, then the podmedic half).")
    timers = max((run.get("timers_per_incident", 0) for run in r["servers"].values()), default=0)
    shape = "K no-op activities" + (" and the incident's timers (short)" if timers else "")
    return [f"{r['incidents']} incidents at once (100 in flight), {per_node_words(r)}, against {r['incidents']} "
            f"bare workflows of {shape} on the same server, one fresh stack per server setting.{how}", "",
            table(["server", "K", "bare wf/s", "incidents/s", "ratio", "event→taint p50 / p99 ms",
                   "event→recovered p50 / p99 ms", "outcomes", "load 1m", "CPU s (podmedic run)"], rows),
            "", f"Target: ratio ≥ {r['target_ratio']} on the tuned server."]


def _single(r: dict[str, Any]) -> list[str]:
    rows = [[s, f"{run['event_to_taint_ms']['p50']:.0f} / {run['event_to_taint_ms']['p99']:.0f}",
             f"{run['event_to_recovered_ms']['p50']:.0f} / {run['event_to_recovered_ms']['p99']:.0f}",
             f"{run['bare_k_activities_ms']['p50']:.0f}", f"{run['bare_1_activity_ms']['p50']:.0f}", run["load_1m"]]
            for s, run in r["servers"].items()]
    return [f"{r['incidents']} incidents one after the other; then as many bare workflows, one at a time.", "",
            table(["server", "event→taint p50 / p99 ms", "event→recovered p50 / p99 ms",
                   "bare K activities p50 ms", "bare 1 activity p50 ms", "load 1m"], rows),
            "", f"Target: event→taint p50 ≤ {r['target_p50_ms']:g} ms on the tuned server."]


def _polls(polls: dict[str, Any] | None) -> str:
    """How often the storm's incidents polled the cluster (runs before it recorded nothing)."""
    if not polls:
        return ""
    return (f" podmedic polled at the default policy's pace: checkpoint answers every "
            f"{polls['checkpoint']['poll_s']} s, verification every {polls['recovery']['verify_poll_s']} s, "
            f"health every {polls['close']['poll_s']} s.")


def _storm(r: dict[str, Any]) -> list[str]:
    t, rec = r["event_to_taint_s"], r["event_to_recovered_s"]
    pace = r.get("sim_pace", {})
    how = (f"node quarantine on (the default policy): {r['covered_by_node']} devices tainted by their node's "
           f"cordon and taint, {r.get('own_rule', '?')} by a DeviceTaintRule of their own, "
           f"{r['devices'] - r['tainted']} by neither"
           if r.get("node_quarantine") else "node quarantine off" if r.get("storm_fence")
           else "node quarantine off: a DeviceTaintRule per device")
    if "storm_fence" not in r:
        how += " (measured before the storm fence existed)"
    elif r["storm_fence"]:
        how += (f"; storm fence on: {r['pool_fences']} pools fenced whole, {r['fenced_by_pool_first']} devices "
                f"fenced by their pool's rule before one of their own; worker peak RSS "
                f"{r.get('worker_peak_rss_mib', '?')} MiB; {r['still_running_at_timeout']} incidents still "
                f"running {r.get('wait_s', 900):g} s after the events")
        if turns := r.get("storm_turns"):
            how += (f"; storm turns: {turns['admitted']} incidents waited for their turn, at most "
                    f"{turns['acting_limit']} acting at once")
    else:
        how += "; storm fence off"
    return [f"{r['devices']} devices on {r['nodes']} nodes fail at once ({r['server']} server); events sent over "
            f"{r['send_s']} s; {how}. Simulated training: a step every {pace.get('workload_step_s', '?')} s, "
            f"progress written every {pace.get('progress_write_s', '?')} s.{_polls(r.get('polls'))}", "",
            table(["", "p50 s", "p99 s", "max s", "all done after s", "count"],
                  [["event → tainted", t["p50"], t["p99"], t["max"], r["all_tainted_s"], r["tainted"]],
                   ["event → recovered", rec["p50"], rec["p99"], rec["max"], r["all_recovered_s"], r["recovered"]]]),
            "", f"Outcomes {r['outcomes']}; load 1m {r['load_1m']}; CPU s: "
            + ", ".join(f"{k} {v}" for k, v in r["cpu_s"].items()) + ".",
            *[line.strip()[:1].upper() + line.strip()[1:] + "." for line in budget_line(r.get("api_budget"))],
            f"Target: p99 to taint ≤ {r['target_p99_taint_s']:g} s"
            + (f"; past 1,000 devices every incident closed ({r['closed']} of {r['devices']}) and the worker's peak "
               f"RSS ≤ 1,024 MiB" if r["devices"] > 1000 else "")
            + ". For comparison (their figure, not measured here): NVSentinel cordons 150 nodes failing at once with "
            "P50 16.75 s, P90 28.15 s."]


def _storm_guard(r: dict[str, Any]) -> list[str]:
    most, limit, trip = r["no_execute_most"], r["no_execute_limit"], r["trip_s_after_threshold"]
    return [f"{r['devices']} devices on {r['nodes']} nodes fail for good at once ({r['fault']}; {r['server']} server; "
            f"events sent over {r['send_s']} s), under the fleet guard as the default policy ships it. A storm is "
            f"{r['storm_threshold_devices']} of the {r['fleet_devices']} devices within "
            f"{r['guard']['storm']['window_s']:g} s. Fleet incident `{r['fleet_incident']}`: {r['tripped_summary']}. "
            f"NoExecute DeviceTaintRules listed every {r['sample_s']:g} s; the guard resumed (as `podmedic guard "
            f"resume` does) {r['observe_s']:g} s into the trip, watched {r['observe_s']:g} s more.", "",
            table(["figure", "measured", "target"],
                  [["crossing the storm threshold → fleet incident opened, s", trip, f"≤ {r['target_trip_s']:g}"],
                   *[[f"NoExecute rules at once, most seen ({stage})", n, f"≤ {limit}"] for stage, n in most.items()],
                   ["incidents Throttled, tripped", r["throttled_while_tripped"], ""],
                   ["permits held / waiting after the resume", f"{r['permits_after_resume']} / "
                                                               f"{r['waiting_after_resume']}", ""]]),
            "", f"Load 1m {r['load_1m']}."]


def _goodput(r: dict[str, Any]) -> list[str]:
    if "paired" not in r:
        return ["Not shown: the result on file was measured with an earlier fault model (every fault a crash seen "
                "at once, no hangs, no survivors' failures). Rerun this section's command."]
    from benchmarks.goodput_faults import model_changes

    changed = model_changes(r.get("parameters"))
    stale = [f"**Measured on an earlier model: since then these changed: {'; '.join(changed)}. These are not the "
             "current model's figures; rerun this section's command.**", ""] if changed else []

    def ci(half: float, seeds: int, scale: float = 100.0, digits: int = 1) -> str:
        return f" ± {half * scale:.{digits}f}" if seeds > 1 else " (one seed: no interval)"

    from benchmarks.goodput_run import ABLATION_WORDS

    notes = {"control": " (no faults)", **{name: f" (ablation: {words})" for name, words in ABLATION_WORDS.items()}}
    rows = [[p["policy"] + notes.get(p["policy"], ""),
             f"**{p['effective_training_ratio'] * 100:.1f} %{ci(p['ci95'], p['seeds'])}**",
             f"{p['gpu_min_lost_per_interruption']:.0f}{ci(p['gpu_min_ci95'], p['seeds'], 1, 0)}"
             if p["policy"] != "control" else "",
             sum(run["sigterm_checkpoints"] for run in p["runs"]), p["seeds"]]
            for p in r["policies"]]
    pairs = [[f"{d['policy']} - {d['baseline']}", f"**{d['difference'] * 100:+.1f}{ci(d['ci95'], d['seeds'])}**",
              d["seeds"]] for d in r["paired"]]
    faulted = [p for p in r["policies"] if p["policy"] != "control"]
    stage_names = list(faulted[0]["per_interruption_by_stage"]) if faulted else []
    stages = [[p["policy"], *(f"{p['per_interruption_by_stage'][s]:.0f}" for s in stage_names)] for p in faulted]
    causes = [[p["policy"], ", ".join(f"{c} {m:.0f}" for c, m in list(p["stalled_by_cause"].items())[:6])]
              for p in faulted]
    return [*stale, r["description"], "", table(["policy", "ETTR (mean ± 95 % CI)", "GPU-minutes lost per interruption",
                                        "SIGTERM saves", "seeds"], rows), "",
            "Paired by seed (the same faults), ETTR points:", "",
            table(["difference", "points (mean ± 95 % CI)", "seeds"], pairs), "",
            "GPU-minutes lost per interruption, by stage (`benchmarks/goodput_stages.py`):", "",
            table(["policy", *stage_names], stages), "",
            "Stalled GPU-minutes by cause (all seeds, the six largest):", "", table(["policy", "by cause"], causes),
            "", f"Faults drawn over all seeds: {r['mix_drawn']}."]


def goodput_model() -> list[str]:
    """The goodput model's parameters and causes, from ``benchmarks/goodput_faults.py``."""
    from benchmarks.goodput_faults import CAUSES, MIX, PARAMETERS

    causes = [[name, MIX[name], ", ".join(f"{s} {w:g}" for s, w in c.shows), c.xid or "none",
               ", ".join(f"{k} {w:g}" for k, w in c.repair), c.source] for name, c in CAUSES.items()]
    return ["Every parameter of the goodput model (`benchmarks/goodput_faults.py`, `benchmarks/goodput_run.py`):", "",
            table(["parameter", "value", "source", "kind"], [list(p) for p in PARAMETERS]), "",
            "How each cause shows (share), what a device watcher sees (XID), and its repair (share):", "",
            table(["cause", "count", "shows", "XID", "repair", "source"], causes)]


def _sensitivity(r: dict[str, Any]) -> list[str]:
    from benchmarks.goodput_sensitivity import KNOB_WORDS, SENSITIVITY_POLICIES, sensitivity_rows

    if "knobs" not in r or not set(r["knobs"]) <= set(KNOB_WORDS):
        return ["Not shown: the result on file was measured with an earlier fault model. Rerun this section's "
                "command."]
    out = [f"{r['description']}: one interruption per job every {r['interval_h']} h (scaled). Each chosen value "
           "varied on its own, the others at the base's; every policy on the same seeded faults. Cells: ETTR, "
           "mean ± 95 % CI with more than one seed (GPU-minutes lost per interruption).", ""]
    for knob, rows in r["knobs"].items():
        out += [f"**{KNOB_WORDS[knob]}**", "", table(["value", *SENSITIVITY_POLICIES], sensitivity_rows(knob, rows)),
                ""]
    return out


def _cost(r: dict[str, Any]) -> list[str]:
    rows = [["Kubernetes API requests per incident", r["api_requests_per_incident"],
             f"≤ {r['targets']['api_requests_per_incident']}"],
            ["worker CPU ms per incident", r["worker_cpu_ms_per_incident"], ""],
            ["bare worker CPU ms per workflow (same activities and timers, run beside the incidents)",
             r["bare_worker_cpu_ms_per_workflow"], ""],
            ["worker CPU, ratio to bare", r["worker_cpu_ratio_to_bare"],
             f"≤ {r['targets']['worker_cpu_ratio_to_bare']}"],
            *([["bare worker CPU ms per workflow, the same bare workflows run alone before (a quieter machine)",
                r["bare_worker_cpu_ms_per_workflow_alone"], ""]]
              if "bare_worker_cpu_ms_per_workflow_alone" in r else []),
            *([[f"worker CPU with no incident, ms per s (its pod cache's watch of {r['pods_watched']} pods)",
                r["worker_idle_cpu_ms_per_s"], ""],
               ["worker CPU ms per incident above that", r["worker_cpu_ms_per_incident_above_idle"], ""],
               ["worker CPU above that, ratio to bare", r["worker_cpu_ratio_to_bare_above_idle"],
                f"≤ {r['targets']['worker_cpu_ratio_to_bare']}"]] if "worker_idle_cpu_ms_per_s" in r else []),
            ["history events per incident (bare workflow)",
             f"{r['history_events_per_incident']} ({r['bare_history_events_per_workflow']})", ""],
            ["Temporal server CPU ms per incident (bare workflow)",
             f"{r['server_cpu_ms_per_incident']} ({r['server_cpu_ms_per_bare_workflow']})", ""],
            ["simulator CPU ms per incident", r["simulator_cpu_ms_per_incident"], ""],
            ["bench process (delivers the events, as the ingest) CPU ms per incident", r["bench_cpu_ms_per_incident"],
             ""],
            *([["full collections of the worker's cyclic garbage, count: ms per incident (bare worker's)",
                sweeps_cell(r), ""]] if r.get("worker_full_collections") else [])]
    kinds = [[kind, n] for kind, n in r["api_requests_by_kind"].items()]
    bare_threads = r.get("bare_worker_cpu_ms_per_workflow_by_thread", {})
    threads = [[group, ms, bare_threads.get(group, 0.0)]
               for group, ms in r.get("worker_cpu_ms_per_incident_by_thread", {}).items()
               if ms or bare_threads.get(group)]
    by_thread = ["", "Worker CPU by thread (kernel thread names; `python` is the asyncio loop, where the SDK handles "
                     "activity and workflow tasks, and any unnamed thread):", "",
                 table(["thread", "podmedic ms per incident", "bare ms per workflow"], threads)] if threads else []
    median = f" {line} (each run on a fresh stack)." if (line := runs_line(r)) else ""
    return [f"{r['incidents']} incidents of {r['activities_per_incident']} activities and "
            f"{r.get('timers_per_incident', 0)} timer(s) (XID 94, in-place restart), and as many bare workflows of as "
            f"many no-op activities and short timers; server {r['server']}, load {r['load_1m']}. CPU from /proc per "
            f"process, requests from the simulator's ledger (the worker's User-Agent).{median}", "",
            table(["figure", "measured", "target"], rows), *by_thread, "",
            "Requests per incident, by kind (non-2xx apart):", "", table(["request", "per incident"], kinds)]


def _memory(r: dict[str, Any]) -> list[str]:
    rows = [[row["what"], row["rss_mib"]] for row in r["rows"]]
    return [r["description"], "", table(["process, state", "RSS MiB"], rows)]


SECTIONS = {"orchestration": ("Orchestration: podmedic vs bare Temporal", _orchestration),
            "orchestration-packed": ("Orchestration with 8 failing devices per node (node incidents)", _orchestration),
            "single": ("Single incident latency", _single),
            "cost": ("Cost of one incident, process by process", _cost),
            "storm": ("Storm: a fleet failing at once", _storm),
            "storm-node": ("Storm with node quarantine (the default policy)", _storm),
            "storm-10k": ("Storm: 10,000 devices at once (the storm fence)", _storm),
            "storm-qps": ("Storm: 1,000 devices at once, the worker limited to 50 API requests a second", _storm),
            "storm-10k-qps": ("Storm: 10,000 devices at once, the worker limited to 50 API requests a second",
                              _storm),
            "storm-guard": ("Storm under the shipped fleet guard", _storm_guard),
            "goodput": ("Goodput of single-node jobs at Llama 3's interruption rate", _goodput),
            "goodput-jobset": ("Goodput of a multi-node JobSet (4 nodes x 8 GPUs) at Llama 3's interruption rate",
                               _goodput),
            "goodput-jobset-nccl": ("Goodput of a JobSet under hangs no device reports (NCCL watchdog timeouts "
                                    "only, a targeted run)", _goodput),
            "goodput-jobset-inplace": ("Goodput of a JobSet that restarts in place (restartStrategy InPlaceRestart, "
                                       "KEP-467) at Llama 3's interruption rate", _goodput),
            "goodput-sensitivity": ("Goodput: how far it rests on its chosen values", _sensitivity),
            "memory": ("Memory", _memory)}


def _width(runs: dict[str, list[str]]) -> int:
    """The command column's width: the longest command and two spaces."""
    return max((len(" ".join(argv)) for argv in runs.values()), default=0) + 2


def render(results: dict[str, Any], runs: dict[str, list[str]], plots: list[Path], docdir: Path,
           notes: str) -> str:
    """The whole document."""
    out = ["# Benchmarks", "",
           "Generated by `python -m benchmarks report` (the whole page and `docs/img/*.png`; how long it took is "
           "below), except the method at the end, which it keeps as written. "
           "Every figure below was measured in the run that wrote it; ratios compare runs on the same machine in the "
           "same command. The 1-minute load average is next to every figure: on 2 cores the benchmark's own "
           "processes make a load of 2 to 3.5; more means something else was running.",
           "", f"**Machine**: {_machine(results)}", "", *_took(results), "## Commands", "", "```sh",
           "python -m benchmarks report             # everything below, then this page and the plots",
           "python -m benchmarks report --only-docs # this page and the plots from bench/results/*.json",
           *[f"python -m benchmarks {' '.join(argv):<{_width(runs)}}# -> bench/results/{name}.json"
             for name, argv in runs.items()],
           "```", ""]
    for name, (title, section) in SECTIONS.items():
        if name == "goodput":
            out += ["## The goodput model", "", *goodput_model(), ""]
        out += [f"## {title}", "", f"`python -m benchmarks {' '.join(runs.get(name, [name]))}`", ""]
        out += section(results[name]) if name in results else ["Not run yet."]
        out.append("")
    if plots:
        out += ["## Plots", ""]
        out += [f"![{p.stem}]({os.path.relpath(p, docdir)})" for p in plots]
        out.append("")
    out += [NOTES_BEGIN, notes, NOTES_END, ""]
    return "\n".join(out)
