"""``python -m benchmarks storm``: every GPU of a fleet fails at once (NVSentinel's test, per device).

1,000 devices on 125 nodes (each with a single-GPU training Job, plus a node for the
warm-up's) fail together with a transient XID; every event goes to podmedic at once (100
in flight). Figures: event -> DeviceTaintRule per device (p50, p99, max), the time from the
first event until every device is tainted and until every workload is verified recovered,
and each process's CPU seconds (what limits the figure). podmedic polls the cluster at the
default policy's pace (``settings.STORM_POLLS``), not the 20-100 ms the single-incident
benchmarks use to time recoveries to the millisecond.

``--node-quarantine`` runs the storm with the default policy's node quarantine on: a node
whose devices fail together becomes one node incident that cordons and taints the node. Each
device is fenced by a NoSchedule rule of its own first (it is not yet known to be covered);
one that got no rule (its incident learnt of the node incident before its fence) counts as
tainted when the node's quarantine was in place (its node incident's timeline), or at its
event if the node was quarantined before its own device was reported. The figures also say
how many nodes were quarantined.

``--kube-qps Q`` runs it against a shared API server: the worker limited to Q requests a second
(burst ``--kube-burst``), the server refusing with 429 and ``Retry-After`` past a budget a fifth
above that (``benchmarks/api_budget.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from benchmarks.api_budget import UNLIMITED, ApiBudget, budget_line
from benchmarks.detection import cpu_seconds
from benchmarks.fleet import Fault, Sim, Timing, collect, deliverer, fence_time, fire, wait_closed
from benchmarks.memory import rss_mib
from benchmarks.orchestration import incident_figures, prepared
from benchmarks.results import write
from benchmarks.settings import SERVERS, STORM_POLLS, bench_policy, stack_config, storm_timings
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m, machine
from podmedic.domain.node import NodeIncidentState, node_workflow_id
from podmedic.domain.pool_fence import PoolRef
from podmedic.domain.storm_turns import TurnsState, turns_workflow_id

TARGET_P99_TAINT_S = 20.0
TARGET_P99_TAINT_HALL_S = 60.0  # the target past 1,000 devices (10,000 devices on a 2-core machine)
TARGET_WORKER_RSS_MIB = 1024.0  # the target: the whole storm, on one worker


async def run_storm(nodes: int, devices_per_node: int, server: str, progress: Any = print, *,
                    node_quarantine: bool = False, storm_fence: bool = True, wait_s: float = 900,
                    budget: ApiBudget = UNLIMITED) -> dict[str, Any]:
    """Fail every device at once; returns the figures."""
    devices = nodes * devices_per_node
    pace = storm_timings(devices)
    config = stack_config(server, nodes + 1, timings=pace, worker_env=budget.worker_env())
    policy = bench_policy(**STORM_POLLS, **({"node_quarantine": {"enabled": True}} if node_quarantine else {}),
                          detection={"storm_fence": {"enabled": storm_fence}})
    async with running_stack(config) as stack, Sim(stack.sim_url) as sim:
        await budget.apply(sim)
        pods, shape = await prepared(stack, sim, devices, "storm", policy)
        progress(f"[storm] {len(pods)} training pods Ready on {len({p['node'] for p in pods})} nodes")
        delivery = deliverer(stack.client, policy, stack.task_queue)
        before = cpu_seconds(stack.pids)
        timings = await fire(sim, delivery, pods, Fault(), concurrency=100)
        sent_s = max(t.sent for t in timings) - min(t.sent for t in timings)
        progress(f"[storm] {len(timings)} events sent over {sent_s:.1f} s; waiting for every incident to close")
        still = await wait_closed(stack.client, wait_s)
        turns = await storm_turns(stack.client, pods[0]["devices"][0].split("/")[0])
        after = cpu_seconds(stack.pids)
        worker_peak_rss = rss_mib(stack.pids["worker"], "VmHWM")
        collected = await collect(stack.client, timings, min(600.0, wait_s))
        covered = await node_covered(stack.client, collected, {p["devices"][0]: p["node"] for p in pods})
        by_pool, pool_fences = await pool_covered(stack.client, collected)
        own_rule = sum(1 for t in collected if t.tainted is not None and not t.covered_by and not t.pool_fenced)
        nodes_quarantined = (sum([await _quarantined_at(stack.client, n) is not None
                                  for n in sorted({p["node"] for p in pods})]) if node_quarantine else 0)
        figures = incident_figures(collected)
        api_budget = await budget.figures(sim, stack.workdir / "logs" / "worker.log")
    figures["event_to_taint_s"] = {k2: round(v / 1000, 2) for k2, v in figures["event_to_taint_ms"].items()}
    figures["event_to_recovered_s"] = {k2: round(v / 1000, 2) for k2, v in figures["event_to_recovered_ms"].items()}
    progress(f"[storm] all tainted after {figures['all_tainted_s']} s")
    return {"benchmark": "storm", "machine": machine(), "nodes": nodes, "devices": devices, "server": server,
            "server_flags": SERVERS[server], "activities_per_incident": shape.activities, "send_s": round(sent_s, 2),
            "node_quarantine": node_quarantine, "covered_by_node": covered, "own_rule": own_rule,
            "storm_fence": storm_fence, "pool_fences": pool_fences, "fenced_by_pool_first": by_pool,
            "wait_s": wait_s, "worker_peak_rss_mib": worker_peak_rss, "storm_turns": turns,
            "target_worker_rss_mib": TARGET_WORKER_RSS_MIB,
            "nodes_quarantined": nodes_quarantined, "api_budget": api_budget,
            "polls": STORM_POLLS,
            "sim_pace": {"workload_step_s": pace.workload_step_s, "progress_write_s": pace.progress_write_s},
            **figures, "still_running_at_timeout": still, "load_1m": load_1m(),
            "cpu_s": {("bench" if r == "ingest" else r): round(after[r] - before.get(r, 0.0), 1) for r in after},
            "p99_s_event_to_taint": figures["event_to_taint_s"]["p99"], "target_p99_taint_s": target_p99(devices)}


async def storm_turns(client: Client, driver: str) -> dict[str, int] | None:
    """The driver's turn-keeper's count (``workflows/fleet/storm_turn_keeper.py``): turns given and given back, and the
    limit; None when there was none (no storm, or the incidents were opened before it was seen)."""
    handle = client.get_workflow_handle(turns_workflow_id(driver), result_type=TurnsState)
    try:
        running = (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        state = await (handle.query("get_state", result_type=TurnsState) if running else handle.result())
    except (RPCError, WorkflowFailureError):
        return None
    return {"acting_limit": state.acting_limit, "admitted": state.admitted, "closed": state.closed}


def target_p99(devices: int) -> float:
    """The fence's p99 target: 20 s up to 1,000 devices, 60 s for a hall-wide event."""
    return TARGET_P99_TAINT_S if devices <= 1000 else TARGET_P99_TAINT_HALL_S


async def node_covered(client: Client, timings: list[Timing], node_of: dict[str, str]) -> int:
    """Give each device a node quarantine covered its taint time (see the module's doc); returns how many."""
    quarantined: dict[str, float | None] = {}
    count = 0
    for timing in timings:
        if timing.tainted is not None or not timing.covered_by:
            continue
        node = node_of[timing.resource_id]
        if node not in quarantined:
            quarantined[node] = await _quarantined_at(client, node)
        at = quarantined[node]
        if at is not None:
            timing.tainted = max(at, timing.sent)
            count += 1
    return count


async def pool_covered(client: Client, timings: list[Timing]) -> tuple[int, int]:
    """Give each device its pool fence's time (``workflows/fleet/pool_fence.py``) where that came before its own
    rule: a device whose pool was fenced before its event counts as fenced at its event. Returns how many
    devices their pool fenced first, and how many pools were fenced."""
    fenced: dict[str, float | None] = {}
    count = 0
    for timing in timings:
        driver, pool, _ = timing.resource_id.split("/")
        fence = PoolRef(driver=driver, pool=pool).workflow_id
        if fence not in fenced:
            try:
                fenced[fence] = fence_time(await client.get_workflow_handle(fence).fetch_history(), "fence_pool")
            except RPCError:  # no pool fence: not a storm, or the fence is off
                fenced[fence] = None
        at = fenced[fence]
        if at is not None and (timing.tainted is None or max(at, timing.sent) < timing.tainted):
            timing.tainted, timing.pool_fenced = max(at, timing.sent), True
            count += 1
    return count, sum(1 for at in fenced.values() if at is not None)


async def _quarantined_at(client: Client, node: str) -> float | None:
    """When the node's incident cordoned and tainted the node (its latest run, read by query); None
    when it did not, or there is no node incident."""
    try:
        state = await client.get_workflow_handle(node_workflow_id(node)).query("get_state",
                                                                               result_type=NodeIncidentState)
    except RPCError:
        return None
    # "node N cordoned and tainted K:E", or "node N already quarantined (cordoned and tainted K:E)" when the
    # activity's first attempt did it but timed out (a storm): then the retry's time, an upper bound.
    return next((e.at.timestamp() for e in state.timeline if e.step == "quarantine"
                 and e.message.startswith(f"node {node} ") and "cordoned and tainted" in e.message), None)


def storm_table(r: dict[str, Any]) -> str:
    """The storm figures as plain text."""
    t, rec = r["event_to_taint_s"], r["event_to_recovered_s"]
    target = r.get("target_p99_taint_s", TARGET_P99_TAINT_S)
    verdict = "met" if r["tainted"] == r["devices"] and t["p99"] <= target else "MISSED"
    return "\n".join([
        f"storm: {r['devices']} devices on {r['nodes']} nodes fail at once ({r['server']} server; "
        f"events sent over {r['send_s']} s)",
        f"  event -> tainted:    p50 {t['p50']:.2f} s  p99 {t['p99']:.2f} s  max {t['max']:.2f} s; "
        f"all {r['tainted']}/{r['devices']} after {r['all_tainted_s']} s",
        f"  event -> recovered:  p50 {rec['p50']:.2f} s  p99 {rec['p99']:.2f} s  max {rec['max']:.2f} s; "
        f"all {r['recovered']}/{r['devices']} after {r['all_recovered_s']} s",
        *([f"  node quarantine on: {r.get('nodes_quarantined', '?')} of {r['nodes']} nodes quarantined; "
           f"{r['covered_by_node']} devices tainted by their node's quarantine, "
           f"{r['own_rule']} by a DeviceTaintRule of their own, {r['devices'] - r['tainted']} by neither"]
          if r.get("node_quarantine") else []),
        *([f"  storm fence on: {r.get('pool_fences', 0)} pools fenced; {r.get('fenced_by_pool_first', 0)} devices "
           f"fenced by their pool's rule before one of their own"] if r.get("storm_fence") else []),
        f"  outcomes {r['outcomes']}; CPU s: " + ", ".join(f"{k} {v}" for k, v in r["cpu_s"].items()),
        *[f"  not recovered, {n}: {why}" for why, n in r.get("why_not_recovered", {}).items()],
        *([f"  storm turns: {turns['admitted']} incidents waited for their turn, at most {turns['acting_limit']} "
           f"acting at once; {turns['closed']} turns given back"] if (turns := r.get("storm_turns")) else []),
        *budget_line(r.get("api_budget")),
        f"  worker peak RSS {r.get('worker_peak_rss_mib', '?')} MiB; still running after "
        f"{r.get('wait_s', 900):g} s: {r['still_running_at_timeout']}",
        f"  target p99 to taint <= {target:g} s: {verdict}; every incident closed: "
        f"{'met' if r['closed'] == r['devices'] else 'MISSED'} ({r['closed']}/{r['devices']}); worker peak RSS <= "
        f"{r.get('target_worker_rss_mib', TARGET_WORKER_RSS_MIB):g} MiB: "
        f"{'met' if r.get('worker_peak_rss_mib', 1e9) <= TARGET_WORKER_RSS_MIB else 'MISSED'}; "
        f"1-min load {r['load_1m']}",
        "  NVSentinel, 150 nodes at once: cordon P50 16.75 s, P90 28.15 s (its figure, not measured here)",
    ])


def run_and_print(nodes: int, devices_per_node: int, server: str, out: Path, *,
                  node_quarantine: bool = False, storm_fence: bool = True, wait_s: float = 900,
                  budget: ApiBudget = UNLIMITED) -> dict[str, Any]:
    """The command's body."""
    results = asyncio.run(run_storm(nodes, devices_per_node, server, node_quarantine=node_quarantine,
                                    storm_fence=storm_fence, wait_s=wait_s, budget=budget))
    print(storm_table(results))
    write(results, out)
    return results
