"""``python -m benchmarks orchestration`` and ``python -m benchmarks single``: podmedic against bare Temporal.

Each server setting (``benchmarks.settings.SERVERS``: ``default`` and ``tuned``) gets a fresh
stack: the Temporal dev server, the simulator (one single-GPU training Job per incident, all
Ready before the clock starts), podmedic's worker and the bare baseline's worker, each in its
own process. One warm-up incident runs first; its history says how many activities an
incident schedules (K) and its timers (T), and the bare baseline runs workflows of K no-op activities
and T short timers.

- orchestration: N bare workflows at once, then N incidents at once (XID 94, transient: the
  full pipeline: discover, checkpoint, taint, in-place restart, verify, untaint, close). Each
  failing device is on a node of its own unless ``--per-node`` says more: 3 or more failing
  devices of one node within 2 minutes are a node incident (``node_correlation``), which is
  the storm's pattern, with work of its own (a node incident workflow that tells each device).
- single: one incident at a time, then one bare workflow at a time.
"""

from __future__ import annotations

import asyncio
import re
import time
from statistics import median
from typing import Any

from benchmarks.bare import Shape, run_bare
from benchmarks.detection import cpu_seconds
from benchmarks.fleet import (
    DRIVER,
    Fault,
    Sim,
    Timing,
    collect,
    deliverer,
    fire,
    incident_shape,
    wait_closed,
)
from benchmarks.settings import DEVICES_PER_NODE, SERVERS, bench_policy, stack_config
from benchmarks.stack import BenchStack, running_stack
from benchmarks.stats import load_1m, machine, rate, ratio, summary
from podmedic.domain.policy_file import PolicySet
from podmedic_sim.topology import node_name

TARGET_RATIO = 0.8
TARGET_SINGLE_P50_MS = 200.0


def nodes_for(incidents: int, per_node: int = DEVICES_PER_NODE) -> int:
    """Nodes for the warm-up's training pod (a node of its own), ``incidents`` more ``per_node`` to a node,
    and a node to spare."""
    return 1 + (incidents + per_node - 1) // per_node + 1


def placement(names: list[str], per_node: int) -> dict[str, str]:
    """Job name -> node: the first (the warm-up) alone on the first node, then ``per_node`` to a node."""
    return {name: node_name(0 if i == 0 else 1 + (i - 1) // per_node) for i, name in enumerate(names)}


def incident_figures(timings: list[Timing]) -> dict[str, Any]:
    """Throughput and latency of a set of incidents that started together."""
    done = [t for t in timings if t.closed is not None]
    first = min((t.sent for t in timings), default=0.0)
    last = max((t.closed for t in done if t.closed is not None), default=first)
    taint = [ms for t in timings if (ms := t.ms(t.tainted)) is not None]
    recovered = [ms for t in timings if (ms := t.ms(t.recovered)) is not None]
    outcomes: dict[str, int] = {}
    for t in timings:
        outcomes[t.outcome] = outcomes.get(t.outcome, 0) + 1
    return {"incidents": len(timings), "closed": len(done), "outcomes": outcomes, "why_not_recovered": why_not(timings),
            "elapsed_s": round(last - first, 3), "incidents_per_s": rate(len(done), last - first),
            "event_to_taint_ms": summary(taint), "event_to_recovered_ms": summary(recovered),
            "tainted": len(taint), "recovered": len(recovered),
            "all_tainted_s": round((max(t.tainted for t in timings if t.tainted) - first), 3) if taint else None,
            "all_recovered_s": round((max(t.recovered for t in timings if t.recovered) - first), 3)
            if recovered else None,
            # Every sample, for the plots (docs/img): integers keep the JSON small.
            "samples_ms": {"event_to_taint": sorted(round(v) for v in taint),
                           "event_to_recovered": sorted(round(v) for v in recovered)}}


def why_not(timings: list[Timing], kinds: int = 5) -> dict[str, int]:
    """The explanations of the closed incidents that recovered nothing, numbers and names blanked so that
    alike ones count together: the ``kinds`` most frequent, with their counts."""
    counts: dict[str, int] = {}
    for t in timings:
        if t.closed is not None and t.recovered is None:
            key = re.sub(r"[0-9a-f]{8,}|\d+", "N", t.explanation)[:300]
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:kinds])


async def prepared(stack: BenchStack, sim: Sim, count: int, prefix: str,
                   policy: PolicySet | None = None, per_node: int | None = None) -> tuple[list[dict[str, Any]], Shape]:
    """``count`` Ready training pods, after a warm-up incident under ``policy`` (default: the benchmark
    policy; the warm-up opens its node's watch, which keeps the policy it was opened with); and the
    warm-up's shape (its K activities and its timers), which the bare baseline copies. ``per_node`` pins
    the pods that many to a node (``placement``: the warm-up's alone, so its failure counts towards no
    other node's correlation); ``None`` lets the simulated scheduler place them (it packs them)."""
    names = [f"{prefix}-{i:04d}" for i in range(count + 1)]
    pods = await sim.start_jobs(names, nodes=placement(names, per_node) if per_node else None)
    ordered = [pods[name] for name in sorted(pods)]
    delivery = deliverer(stack.client, policy or bench_policy(), stack.task_queue)
    warm = await fire(sim, delivery, ordered[:1], Fault())
    if await wait_closed(stack.client, 120):
        raise RuntimeError(f"the warm-up incident did not close: see the worker log under {stack.workdir}")
    return ordered[1:], await incident_shape(stack.client, warm[0].resource_id)


async def _orchestration_on(server: str, incidents: int, concurrency: int, per_node: int, rounds: int,
                            progress: Any) -> dict[str, Any]:
    async with running_stack(stack_config(server, nodes_for(incidents * rounds, per_node), bare=True)) as stack, \
            Sim(stack.sim_url) as sim:
        pods, shape = await prepared(stack, sim, incidents * rounds, "orch", per_node=per_node)
        progress(f"[{server}] {len(pods)} training pods Ready on {len({p['node'] for p in pods})} nodes; "
                 f"an incident schedules {shape.activities} activities and {shape.timers} timer(s)")
        await run_bare(stack.client, 1, shape)  # the bare worker warm too
        done: list[dict[str, Any]] = []
        # Bare and podmedic alternate, each round on pods of its own: the machine's speed drifts within
        # minutes, so a ratio of neighbours is steadier than one of two halves far apart.
        for r in range(rounds):
            bare, figures = await _round(stack, sim, pods[r * incidents:(r + 1) * incidents], shape,
                                          concurrency)
            done.append({"bare": bare, "podmedic": figures,
                         "ratio_to_bare": ratio(figures["incidents_per_s"], bare["workflows_per_s"])})
            progress(f"[{server}] round {r + 1}/{rounds}: bare {bare['workflows_per_s']} workflows/s of "
                     f"{shape.activities} activities, podmedic {figures['incidents_per_s']} incidents/s, "
                     f"ratio {done[-1]['ratio_to_bare']}")
    ratios = sorted(d["ratio_to_bare"] for d in done)
    middle = sorted(done, key=lambda d: d["ratio_to_bare"])[(len(done) - 1) // 2]
    return {"server": server, "server_flags": SERVERS[server], "activities_per_incident": shape.activities,
            "timers_per_incident": shape.timers, "nodes": len({p["node"] for p in pods[:incidents]}),
            "bare": middle["bare"],
            "podmedic": middle["podmedic"], "ratio_to_bare": median(ratios), "ratio_min": ratios[0],
            "ratio_max": ratios[-1], "rounds": [{"bare_workflows_per_s": d["bare"]["workflows_per_s"],
                                                 "incidents_per_s": d["podmedic"]["incidents_per_s"],
                                                 "ratio_to_bare": d["ratio_to_bare"]} for d in done]}


async def _round(stack: BenchStack, sim: Sim, pods: list[dict[str, Any]], shape: Shape,
                 concurrency: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One bare run of ``len(pods)`` workflows, then as many incidents on ``pods``."""
    cpu = cpu_seconds(stack.pids)
    bare = await run_bare(stack.client, len(pods), shape, concurrency)
    bare["cpu_s"] = cpu_since(cpu, stack.pids)
    bare["load_1m"] = load_1m()
    delivery = deliverer(stack.client, bench_policy(), stack.task_queue)
    cpu = cpu_seconds(stack.pids)
    timings = await fire(sim, delivery, pods, Fault(), concurrency)
    still = await wait_closed(stack.client, 600)
    cpu_used = cpu_since(cpu, stack.pids)
    figures = incident_figures(await collect(stack.client, timings))
    figures.update(cpu_s=cpu_used, load_1m=load_1m(), still_running_at_timeout=still)
    return bare, figures


def cpu_since(before: dict[str, float], pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds each process used since ``before`` (``cpu_seconds``); this process is ``bench``."""
    after = cpu_seconds(pids)
    # cpu_seconds calls this process "ingest" (the detection bench serves the ingest here); here it only sends.
    return {("bench" if role == "ingest" else role): round(after[role] - before.get(role, 0.0), 1) for role in after}


def _headline(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's flat keys, from the tuned run (else the last)."""
    run = runs.get("tuned") or list(runs.values())[-1]
    p = run["podmedic"]
    return {"incidents_per_s": p["incidents_per_s"], "bare_workflows_per_s": run["bare"]["workflows_per_s"],
            "ratio_to_bare": run["ratio_to_bare"], "p50_ms_event_to_taint": p["event_to_taint_ms"]["p50"],
            "p99_ms_event_to_taint": p["event_to_taint_ms"]["p99"],
            "p50_ms_event_to_recovered": p["event_to_recovered_ms"]["p50"],
            "p99_ms_event_to_recovered": p["event_to_recovered_ms"]["p99"]}


async def run_orchestration(incidents: int, servers: list[str], concurrency: int = 100, per_node: int = 1,
                            rounds: int = 1, progress: Any = print) -> dict[str, Any]:
    """The orchestration benchmark on each server setting, ``per_node`` failing devices to a node, ``rounds``
    bare and podmedic rounds alternating; returns the figures (the ratio is the rounds' median)."""
    runs = {s: await _orchestration_on(s, incidents, concurrency, per_node, rounds, progress) for s in servers}
    return {"benchmark": "orchestration", "machine": machine(), "incidents": incidents,
            "concurrency": concurrency, "per_node": per_node, "rounds": rounds, **_headline(runs), "servers": runs,
            "target_ratio": TARGET_RATIO}


async def _single_on(server: str, count: int, progress: Any) -> dict[str, Any]:
    async with running_stack(stack_config(server, nodes_for(count), bare=True)) as stack, \
            Sim(stack.sim_url) as sim:
        pods, shape = await prepared(stack, sim, count, "single")  # one at a time: where they run matters little
        delivery = deliverer(stack.client, bench_policy(), stack.task_queue)
        timings = []
        for pod in pods:
            timing = (await fire(sim, delivery, [pod], Fault()))[0]
            await wait_closed(stack.client, 120)
            timings.extend(await collect(stack.client, [timing]))
        figures = incident_figures(timings)
        bare_k = [(await run_bare(stack.client, 1, shape))["p50_ms"] for _ in range(count)]
        bare_1 = [(await run_bare(stack.client, 1, Shape(1)))["p50_ms"] for _ in range(count)]
        progress(f"[{server}] single: event->taint p50 {figures['event_to_taint_ms']['p50']} ms")
    return {"server": server, "server_flags": SERVERS[server], "activities_per_incident": shape.activities,
            "timers_per_incident": shape.timers, "event_to_taint_ms": figures["event_to_taint_ms"],
            "event_to_recovered_ms": figures["event_to_recovered_ms"],
            "outcomes": figures["outcomes"], "bare_k_activities_ms": summary(bare_k),
            "bare_1_activity_ms": summary(bare_1), "load_1m": load_1m()}


async def run_single(count: int, servers: list[str], progress: Any = print) -> dict[str, Any]:
    """One incident at a time on each server setting; returns the figures."""
    started = time.monotonic()
    runs = {s: await _single_on(s, count, progress) for s in servers}
    tuned = runs.get("tuned") or list(runs.values())[-1]
    return {"benchmark": "single", "machine": machine(), "incidents": count, "servers": runs,
            "p50_ms_event_to_taint": tuned["event_to_taint_ms"]["p50"],
            "p99_ms_event_to_taint": tuned["event_to_taint_ms"]["p99"],
            "target_p50_ms": TARGET_SINGLE_P50_MS, "took_s": round(time.monotonic() - started, 1)}


def per_node_words(r: dict[str, Any]) -> str:
    """How the run placed its failing devices, in words (runs before ``--per-node`` packed 8 to a node)."""
    per_node = r.get("per_node", DEVICES_PER_NODE)
    if per_node == 1:
        return "one failing device per node"
    correlated = bench_policy().for_driver(DRIVER).detection.node_correlation.devices
    return f"{per_node} failing devices per node" + (" (node incidents)" if per_node >= correlated else "")


def orchestration_table(r: dict[str, Any]) -> str:
    """The orchestration figures as plain text."""
    lines = [f"orchestration: {r['incidents']} incidents at once (concurrency {r['concurrency']}), "
             f"{per_node_words(r)}, vs bare Temporal",
             f"  {'server':<8}{'K':>4}{'bare wf/s':>11}{'incidents/s':>13}{'ratio':>7}"
             f"{'taint p50/p99 ms':>20}{'recovered p50/p99 ms':>24}{'load':>6}"]
    for s, run in r["servers"].items():
        p = run["podmedic"]
        lines.append(f"  {s:<8}{run['activities_per_incident']:>4}{run['bare']['workflows_per_s']:>11.1f}"
                     f"{p['incidents_per_s']:>13.1f}{run['ratio_to_bare']:>7.2f}"
                     f"{p['event_to_taint_ms']['p50']:>10.0f}/{p['event_to_taint_ms']['p99']:<9.0f}"
                     f"{p['event_to_recovered_ms']['p50']:>12.0f}/{p['event_to_recovered_ms']['p99']:<11.0f}"
                     f"{p['load_1m']:>6.1f}")
        lines.append(f"  {'':<8}outcomes {p['outcomes']}; CPU s podmedic run: "
                     + ", ".join(f"{k} {v}" for k, v in p["cpu_s"].items()))
        if len(run.get("rounds", [])) > 1:
            lines.append(f"  {'':<8}{len(run['rounds'])} rounds, ratio median {run['ratio_to_bare']:.2f} "
                         f"(from {run['ratio_min']:.2f} to {run['ratio_max']:.2f}); the row above is the median round")
    verdict = "met" if r["ratio_to_bare"] >= TARGET_RATIO else "MISSED"
    lines.append(f"  target ratio >= {TARGET_RATIO} (tuned): {verdict}")
    return "\n".join(lines)


def single_table(r: dict[str, Any]) -> str:
    """The single-incident figures as plain text."""
    lines = [f"single: {r['incidents']} incidents one at a time",
             f"  {'server':<8}{'taint p50/p99 ms':>20}{'recovered p50/p99 ms':>24}"
             f"{'bare K p50 ms':>15}{'bare 1 p50 ms':>15}{'load':>6}"]
    for s, run in r["servers"].items():
        lines.append(f"  {s:<8}{run['event_to_taint_ms']['p50']:>10.0f}/{run['event_to_taint_ms']['p99']:<9.0f}"
                     f"{run['event_to_recovered_ms']['p50']:>12.0f}/{run['event_to_recovered_ms']['p99']:<11.0f}"
                     f"{run['bare_k_activities_ms']['p50']:>15.0f}{run['bare_1_activity_ms']['p50']:>15.0f}"
                     f"{run['load_1m']:>6.1f}")
    verdict = "met" if r["p50_ms_event_to_taint"] <= TARGET_SINGLE_P50_MS else "MISSED"
    lines.append(f"  target event->taint p50 <= {TARGET_SINGLE_P50_MS:g} ms (tuned): {verdict}")
    return "\n".join(lines)


def run_and_print(kind: str, count: int, servers: list[str], out: Any, per_node: int = 1,
                  rounds: int = 1) -> dict[str, Any]:
    """The command's body: run, print the table, write the JSON."""
    from benchmarks.results import write

    if kind == "orchestration":
        results = asyncio.run(run_orchestration(count, servers, per_node=per_node, rounds=rounds))
        print(orchestration_table(results))
    else:
        results = asyncio.run(run_single(count, servers))
        print(single_table(results))
    write(results, out)
    return results
