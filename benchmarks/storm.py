"""``podmedic bench storm``: every GPU of a fleet fails at once (NVSentinel's test, per device).

1,000 devices on 125 nodes (each with a single-GPU training Job, plus a node for the
warm-up's) fail together with a transient XID; every event goes to podmedic at once (100
in flight). Figures: event -> DeviceTaintRule per device (p50, p99, max), the time from the
first event until every device is tainted and until every workload is verified recovered,
and each process's CPU seconds (what limits the figure).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from benchmarks.detection import cpu_seconds
from benchmarks.fleet import Fault, Sim, collect, deliverer, fire, wait_closed
from benchmarks.orchestration import incident_figures, prepared
from benchmarks.results import write
from benchmarks.settings import SERVERS, bench_policy, stack_config
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m, machine

TARGET_P99_TAINT_S = 20.0


async def run_storm(nodes: int, devices_per_node: int, server: str, progress: Any = print) -> dict[str, Any]:
    """Fail every device at once; returns the figures."""
    devices = nodes * devices_per_node
    config = stack_config(server, nodes + 1)
    async with running_stack(config) as stack, Sim(stack.sim_url) as sim:
        pods, k = await prepared(stack, sim, devices, "storm")
        progress(f"[storm] {len(pods)} training pods Ready on {len({p['node'] for p in pods})} nodes")
        delivery = deliverer(stack.client, bench_policy(), stack.task_queue)
        before = cpu_seconds(stack.pids)
        timings = await fire(sim, delivery, pods, Fault(), concurrency=100)
        sent_s = max(t.sent for t in timings) - min(t.sent for t in timings)
        still = await wait_closed(stack.client, 900)
        after = cpu_seconds(stack.pids)
        figures = incident_figures(await collect(stack.client, timings))
    figures["event_to_taint_s"] = {k2: round(v / 1000, 2) for k2, v in figures["event_to_taint_ms"].items()}
    figures["event_to_recovered_s"] = {k2: round(v / 1000, 2) for k2, v in figures["event_to_recovered_ms"].items()}
    progress(f"[storm] all tainted after {figures['all_tainted_s']} s")
    return {"benchmark": "storm", "machine": machine(), "nodes": nodes, "devices": devices, "server": server,
            "server_flags": SERVERS[server], "activities_per_incident": k, "send_s": round(sent_s, 2),
            **figures, "still_running_at_timeout": still, "load_1m": load_1m(),
            "cpu_s": {("bench" if r == "ingest" else r): round(after[r] - before.get(r, 0.0), 1) for r in after},
            "p99_s_event_to_taint": figures["event_to_taint_s"]["p99"], "target_p99_taint_s": TARGET_P99_TAINT_S}


def storm_table(r: dict[str, Any]) -> str:
    """The storm figures as plain text."""
    t, rec = r["event_to_taint_s"], r["event_to_recovered_s"]
    verdict = "met" if r["tainted"] == r["devices"] and t["p99"] <= TARGET_P99_TAINT_S else "MISSED"
    return "\n".join([
        f"storm: {r['devices']} devices on {r['nodes']} nodes fail at once ({r['server']} server; "
        f"events sent over {r['send_s']} s)",
        f"  event -> tainted:    p50 {t['p50']:.2f} s  p99 {t['p99']:.2f} s  max {t['max']:.2f} s; "
        f"all {r['tainted']}/{r['devices']} after {r['all_tainted_s']} s",
        f"  event -> recovered:  p50 {rec['p50']:.2f} s  p99 {rec['p99']:.2f} s  max {rec['max']:.2f} s; "
        f"all {r['recovered']}/{r['devices']} after {r['all_recovered_s']} s",
        f"  outcomes {r['outcomes']}; CPU s: " + ", ".join(f"{k} {v}" for k, v in r["cpu_s"].items()),
        f"  target p99 to taint <= {TARGET_P99_TAINT_S:g} s: {verdict}; 1-min load {r['load_1m']}",
        "  NVSentinel, 150 nodes at once: cordon P50 16.75 s, P90 28.15 s (its figure, not measured here)",
    ])


def run_and_print(nodes: int, devices_per_node: int, server: str, out: Path) -> dict[str, Any]:
    """The command's body."""
    results = asyncio.run(run_storm(nodes, devices_per_node, server))
    print(storm_table(results))
    write(results, out)
    return results
