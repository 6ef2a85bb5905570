"""``python -m benchmarks cost``: what one incident costs, process by process, against bare Temporal.

One stack (``benchmarks.stack``: the Temporal dev server, the simulator, podmedic's worker and the
bare baseline's worker, each its own process). After a warm-up incident (its history says how many
activities an incident schedules, K, and its timers, T), N bare workflows of K no-op activities and T
timers run alone (the issue's baseline: the same activities and timers); then N incidents (XID 94 on N
single-GPU training pods, one per node: discover, checkpoint, taint, in-place restart, verify, untaint,
close) under the shipped default policy (the fleet guard and the storm fence off), and beside them, started
at the same moment, N bare workflows again. CPU time is read from ``/proc/<pid>/stat`` of each process
around each phase. The ratio to bare compares the two workers over the same window, under the same load
(``bare_worker_cpu_ms_per_workflow``); what the bare workflows cost run alone is reported too
(``..._alone``). The server's and the bench process's CPU per incident are their CPU in the shared window
less what the bare workflows cost them alone. So the simulator's and the server's work is not charged to
podmedic; the Kubernetes requests are
counted by the simulator's ledger (podmedic's User-Agent only), and the history events from the
server. The bench process itself stands in for the ingest (it delivers the events, and drives the
simulator): its CPU is reported as ``bench``, not as podmedic's.

The worker's pod cache watches every pod, so the worker spends CPU while no incident runs, as
much as the cluster's pods change. That standing cost is read over ``IDLE_S`` before the
incidents and reported apart (``worker_idle_cpu_ms_per_s``); ``worker_cpu_ms_per_incident``
includes it, ``worker_cpu_ms_per_incident_above_idle`` does not.

Each worker's CPU is also read thread by thread (``/proc/<pid>/task``, by kernel thread name:
``benchmarks.detection.thread_cpu_seconds``): the Temporal SDK's core (``tokio-rt-worker``), its
workflow threads (``workflow-proces``), the asyncio loop (``python``), the Kubernetes-call threads
(``kube``; an incident's writes are made on the loop) and the watches (``pod-cache``, ``claim-cache``,
``rule-cache``), so the difference to bare has an address.
Each worker's full collections (``workers/worker/collector.py``) are read from the line it logs at its stop.
``--runs R`` makes R whole runs, each on a fresh stack, and reports the one with the median ratio.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from temporalio.client import Client

from benchmarks.bare import run_bare
from benchmarks.detection import cpu_seconds, thread_cpu_seconds
from benchmarks.fleet import Fault, Sim, deliverer, fire, wait_closed
from benchmarks.orchestration import cpu_since, nodes_for, prepared
from benchmarks.settings import stack_config, unguarded_default_policy
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m, machine, ratio

ANTI_FLAP_S = 30.0
"""The healed device's wait before its taint goes (the default: 300 s, 20 health reads at 15 s, not 2)."""
IDLE_S = 15.0
"""How long the worker's idle CPU is read before the incidents (its pod cache's watch, in this cluster)."""
SWEEPS = re.compile(r"collector: (\d+) full collections freed \d+ objects in ([\d.]+) ms")
"""The line each worker logs at its stop (``workers/worker/collector.py``): its full collections, and their time."""
TARGET_REQUESTS = 12
TARGET_CPU_RATIO = 1.5


async def _ledger(sim: Sim, method: str) -> list[dict[str, Any]]:
    async with sim.session.request(method, f"{sim.url}/sim/v1/ledger") as answer:
        found: list[dict[str, Any]] = (await answer.json())["entries"]
        return found


async def _history_events(client: Client, query: str) -> list[int]:
    """Events in the history of every closed workflow ``query`` finds."""
    counts = []
    async for wf in client.list_workflows(query):
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        counts.append(len(history.events))
    return counts


def _per(total: float, n: int) -> float:
    return round(total * 1000 / n, 2) if n else 0.0


def _threads_since(before: dict[str, float], pid: int, n: int) -> dict[str, float]:
    """Milliseconds per workflow each thread group of ``pid`` used since ``before``, largest first."""
    after = thread_cpu_seconds(pid)
    spent = {group: _per(after[group] - before.get(group, 0.0), n) for group in after}
    return dict(sorted(spent.items(), key=lambda kv: -kv[1]))


def sweeps(log: Path, workflows: int) -> dict[str, float]:
    """The full collections a worker made in the whole run (its stop line in ``log``): how many, and
    their milliseconds per workflow of the measured phase; empty when the line is missing."""
    found = SWEEPS.findall(log.read_text(errors="replace")) if log.is_file() else []
    if not found:
        return {}
    count, total_ms = found[-1]
    return {"count": int(count), "ms_per_workflow": round(float(total_ms) / max(1, workflows), 2)}


def requests_table(entries: list[dict[str, Any]], incidents: int) -> dict[str, float]:
    """Requests per incident by ``verb resource[/sub]``, largest first; answers other than 2xx apart, by status."""
    kinds: Counter[str] = Counter()
    for e in entries:
        status = "" if 200 <= int(e["status"]) < 300 else f" ({e['status']})"
        kinds[f"{e['verb']} {e['resource']}{'/' + e['subresource'] if e['subresource'] else ''}{status}"] += \
            int(e["count"])
    return {kind: round(n / incidents, 2) for kind, n in kinds.most_common()}


async def run_cost(incidents: int, server: str = "tuned", progress: Any = print) -> dict[str, Any]:
    """The cost figures of ``incidents`` incidents and as many bare workflows."""
    # One failing device per node: independent device incidents, the everyday case (a node losing 3 or more
    # devices together is a node incident as well, which the storm benchmark measures).
    kept = tempfile.TemporaryDirectory(prefix="podmedic-bench-")  # the workers' logs, read after they stop
    async with running_stack(stack_config(server, nodes_for(incidents, 1), bare=True), Path(kept.name)) as stack, \
            Sim(stack.sim_url) as sim:
        # The shipped policy's pace (checkpoint answers polled every 1 s, verification every 2 s, health
        # every 15 s), not the other benchmarks' fast polls: how often podmedic reads is part of what an
        # incident costs. Only the anti-flap wait is cut, from 300 s to ANTI_FLAP_S, so a run takes minutes.
        # 200 failures at once are a storm to the shipped policy: its pool fences are `storm`'s to measure.
        policy = unguarded_default_policy(close={"anti_flap_s": ANTI_FLAP_S},
                                          detection={"storm_fence": {"enabled": False}})
        pods, shape = await prepared(stack, sim, incidents, "cost", policy=policy, per_node=1)
        await run_bare(stack.client, 1, shape)  # the bare worker warm too
        progress(f"[{server}] {len(pods)} training pods Ready; an incident schedules {shape.activities} activities "
                 f"and {shape.timers} timer(s)")
        cpu = cpu_seconds(stack.pids)
        alone = await run_bare(stack.client, incidents, shape)
        alone_cpu = cpu_since(cpu, stack.pids)
        await _ledger(sim, "DELETE")
        # The worker with no incident, for as long: what its pod cache's watch costs in this cluster (every
        # training pod here writes its progress on itself each second), whatever the incidents do.
        idle_from, cpu = time.monotonic(), cpu_seconds(stack.pids)
        await asyncio.sleep(IDLE_S)
        idle = cpu_since(cpu, stack.pids).get("worker", 0.0) / (time.monotonic() - idle_from)
        # The incidents, and beside them as many bare workflows again: both workers' CPU is read over the same
        # window, under the same load of the machine and the server, so what moves the machine's speed (the
        # other processes, the host) moves both. CPU time per unit of work depends on what else runs: the same
        # bare workflows (11 activities, 1 timer, 200 at once) took 48-54 ms each, six times on one stack with
        # no training pod, and 38-46.5 ms in the cost runs' stack of 200 pods, run alone as above.
        began, cpu = time.monotonic(), cpu_seconds(stack.pids)
        threads, bare_threads = thread_cpu_seconds(stack.pids["worker"]), thread_cpu_seconds(stack.pids["bare-worker"])
        beside = asyncio.create_task(run_bare(stack.client, incidents, shape))
        timings = await fire(sim, deliverer(stack.client, policy, stack.task_queue), pods, Fault())
        still = await wait_closed(stack.client, 600)
        await beside
        used, took = cpu_since(cpu, stack.pids), time.monotonic() - began
        threads = _threads_since(threads, stack.pids["worker"], incidents)
        bare_threads = _threads_since(bare_threads, stack.pids["bare-worker"], incidents)
        bare_events = await _history_events(stack.client, "WorkflowType = 'BareWorkflow' AND ExecutionStatus = "
                                                          "'Completed'")
        entries = [e for e in await _ledger(sim, "GET") if e["component"] == "worker"]
        events = await _history_events(stack.client, "WorkflowType = 'DeviceIncident' AND ExecutionStatus != "
                                                     "'Running'")
    logs = Path(kept.name) / "logs"
    worker_sweeps = sweeps(logs / "worker.log", incidents)
    bare_sweeps = sweeps(logs / "bare-worker.log", 2 * incidents)  # it ran the bare workflows twice
    kept.cleanup()
    requests = sum(int(e["count"]) for e in entries)
    worker_ms, bare_ms = _per(used.get("worker", 0.0), incidents), _per(used.get("bare-worker", 0.0), incidents)
    alone_ms = _per(alone_cpu.get("bare-worker", 0.0), incidents)

    def less_bare(role: str) -> float:
        """``role``'s CPU per incident in the shared window, less what the bare workflows cost it alone."""
        return _per(max(0.0, used.get(role, 0.0) - alone_cpu.get(role, 0.0)), incidents)

    above_idle_ms = _per(max(0.0, used.get("worker", 0.0) - idle * took), incidents)
    return {
        "benchmark": "cost", "machine": machine(), "server": server, "incidents": incidents,
        "activities_per_incident": shape.activities, "timers_per_incident": shape.timers,
        "closed": len(timings) - still, "load_1m": load_1m(),
        "policy": f"default, close.anti_flap_s {ANTI_FLAP_S:g} (default 300), fleet guard and storm fence off",
        "api_requests_per_incident": round(requests / incidents, 2),
        "api_requests_by_kind": requests_table(entries, incidents),
        "worker_cpu_ms_per_incident": worker_ms,
        "bare_worker_cpu_ms_per_workflow": bare_ms,
        "worker_cpu_ratio_to_bare": ratio(worker_ms, bare_ms),
        # The same bare workflows run alone before, on a quieter machine: not the baseline (podmedic's worker
        # did not run alone), but what the load of the shared window adds to the same work.
        "bare_worker_cpu_ms_per_workflow_alone": alone_ms,
        "worker_cpu_ms_per_incident_by_thread": threads,
        "bare_worker_cpu_ms_per_workflow_by_thread": bare_threads,
        # On the event loop's thread, within "python" above; the warm-up's and (bare) the other phase's too.
        "worker_full_collections": worker_sweeps,
        "bare_worker_full_collections": bare_sweeps,
        "worker_idle_cpu_ms_per_s": round(idle * 1000, 1),
        "pods_watched": len(pods) + 1,
        "incidents_phase_s": round(took, 1),
        "worker_cpu_ms_per_incident_above_idle": above_idle_ms,
        "worker_cpu_ratio_to_bare_above_idle": ratio(above_idle_ms, bare_ms),
        # Every closed incident's history, the warm-up's included (it is one more of the same).
        "history_events_per_incident": round(sum(events) / max(1, len(events)), 1),
        "bare_history_events_per_workflow": round(sum(bare_events) / max(1, len(bare_events)), 1),
        # The server and the bench process served both halves of the window: the bare workflows' share, as
        # they cost alone, is taken off.
        "server_cpu_ms_per_incident": less_bare("temporal"),
        "server_cpu_ms_per_bare_workflow": _per(alone_cpu.get("temporal", 0.0), incidents),
        "simulator_cpu_ms_per_incident": _per(used.get("simulator", 0.0), incidents),
        "bench_cpu_ms_per_incident": less_bare("bench"),
        "bare_workflows_per_s": alone.get("workflows_per_s"),
        "targets": {"api_requests_per_incident": TARGET_REQUESTS, "worker_cpu_ratio_to_bare": TARGET_CPU_RATIO},
    }


def cost_table(r: dict[str, Any]) -> str:
    """The figures as the command prints them."""
    rows = [
        ("Kubernetes API requests per incident", r["api_requests_per_incident"], f"<= {TARGET_REQUESTS}"),
        ("worker CPU ms per incident", r["worker_cpu_ms_per_incident"], ""),
        ("bare worker CPU ms per workflow", r["bare_worker_cpu_ms_per_workflow"], ""),
        ("worker CPU, ratio to bare", r["worker_cpu_ratio_to_bare"], f"<= {TARGET_CPU_RATIO}"),
        ("bare worker CPU ms per workflow, run alone", r.get("bare_worker_cpu_ms_per_workflow_alone", ""), ""),
        (f"worker CPU idle, ms/s ({r['pods_watched']} pods watched)", r["worker_idle_cpu_ms_per_s"], ""),
        ("worker CPU ms per incident above idle", r["worker_cpu_ms_per_incident_above_idle"], ""),
        ("worker CPU above idle, ratio to bare", r["worker_cpu_ratio_to_bare_above_idle"], f"<= {TARGET_CPU_RATIO}"),
        ("full collections, ms per incident (bare)", sweeps_cell(r), ""),
        ("history events per incident (bare)", f"{r['history_events_per_incident']} "
                                               f"({r['bare_history_events_per_workflow']})", ""),
        ("server CPU ms per incident (bare)", f"{r['server_cpu_ms_per_incident']} "
                                              f"({r['server_cpu_ms_per_bare_workflow']})", ""),
        ("simulator CPU ms per incident", r["simulator_cpu_ms_per_incident"], ""),
        ("bench process (ingest) CPU ms per incident", r["bench_cpu_ms_per_incident"], ""),
    ]
    lines = [f"cost of one incident: {r['incidents']} incidents, {r['activities_per_incident']} activities and "
             f"{r.get('timers_per_incident', 0)} timer(s) each, "
             f"server {r['server']}, load {r['load_1m']}", *filter(None, [runs_line(r)]), ""]
    lines += [f"  {name:<44} {value!s:>14}  {target}" for name, value, target in rows]
    bare_threads = r.get("bare_worker_cpu_ms_per_workflow_by_thread", {})
    lines += ["", "  worker CPU ms per incident by thread (bare worker's per workflow):"]
    lines += [f"    {group:<40} {ms:>6} ({bare_threads.get(group, 0.0)})"
              for group, ms in r.get("worker_cpu_ms_per_incident_by_thread", {}).items()
              if ms or bare_threads.get(group)]
    lines += ["", "  requests per incident by kind:"]
    lines += [f"    {kind:<40} {n:>6}" for kind, n in r["api_requests_by_kind"].items()]
    return "\n".join(lines)


def sweeps_cell(r: dict[str, Any]) -> str:
    """The full collections of both workers, as the tables show them: ``count: ms per workflow`` (bare's)."""
    mine, bare = r.get("worker_full_collections") or {}, r.get("bare_worker_full_collections") or {}
    if not mine or not bare:
        return "not logged"
    return (f"{mine['count']}: {mine['ms_per_workflow']} ({bare['count']}: {bare['ms_per_workflow']})")


RUN_FIGURES = ("worker_cpu_ms_per_incident", "bare_worker_cpu_ms_per_workflow", "worker_cpu_ratio_to_bare",
               "worker_cpu_ratio_to_bare_above_idle", "worker_full_collections", "bare_worker_full_collections",
               "bare_worker_cpu_ms_per_workflow_alone", "api_requests_per_incident", "load_1m")
"""What ``median_run`` keeps of every run beside the median one."""


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose worker CPU ratio to bare is the median (the lower of the middle two of an even
    count), whole, with the chief figures of every run under ``runs`` in the order they ran.

    One run's ratio swings by a quarter on this shared machine (the worker's and the bare worker's
    CPU per workflow move together, but not by the same share), so the figure is the middle of several.
    """
    middle = dict(sorted(runs, key=lambda r: float(r["worker_cpu_ratio_to_bare"]))[(len(runs) - 1) // 2])
    middle["runs"] = [{k: r.get(k) for k in RUN_FIGURES} for r in runs]
    return middle


def runs_line(r: dict[str, Any]) -> str:
    """The ratio of each run, and which one the figures are, when there were several."""
    ratios = [str(run["worker_cpu_ratio_to_bare"]) for run in r.get("runs", [])]
    if len(ratios) < 2:
        return ""
    return (f"{len(ratios)} runs, worker CPU ratio to bare {', '.join(ratios)}: the figures are the median run's "
            f"({r['worker_cpu_ratio_to_bare']})")


def run_and_print(incidents: int, server: str, out: Any, runs: int = 1) -> dict[str, Any]:
    """The command's body: run ``runs`` times (a fresh stack each), print the median run's table, write its JSON."""
    from benchmarks.results import write

    done = []
    for n in range(runs):
        done.append(asyncio.run(run_cost(incidents, server)))
        if runs > 1:
            print(f"run {n + 1} of {runs}: worker CPU ratio to bare {done[-1]['worker_cpu_ratio_to_bare']}",
                  flush=True)
    results = median_run(done)
    print(cost_table(results))
    write(results, out)
    return results
