"""What the fleet guard costs: answers per second and ask latency of the one guard workflow.

Every disruptive step of every incident asks the guard, and the guard is one workflow, so its
update rate is a ceiling on how fast a burst of incidents can start acting. This starts the
benchmark stack (Temporal dev server, simulator, worker: ``benchmarks/stack.py``), then sends
ASKS asks from distinct incidents (a) one at a time and (b) all at once, with limits high
enough that every ask is granted, and prints and writes the figures:

    .venv/bin/python -m benchmarks.fleet_guard --asks 200 --out bench/results/guard.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from activities.fleet_guard import ask
from benchmarks.stack import StackConfig, running_stack
from podmedic.domain.fleet_guard.messages import GUARD_WORKFLOW_ID, GuardStatus, PermitRelease, PermitRequest
from podmedic.domain.fleet_guard.policy import GuardPolicy, StormPolicy
from podmedic.domain.models import DeviceRef

DRIVER = "gpu.nvidia.com"
OPEN = GuardPolicy(max_devices_tainted=100_000, max_nodes_disrupted=100_000, max_driver_share=1, max_pool_share=1,
                   storm=StormPolicy(enabled=False))


def _request(n: int, devices_per_node: int) -> PermitRequest:
    node = f"node-{n // devices_per_node:04d}"
    return PermitRequest(incident_id=f"bench/{n}", device=DeviceRef(driver=DRIVER, pool=node,
                                                                     device=f"gpu-{n % devices_per_node}"),
                         node=node, step="taint", policy=OPEN, search_attributes=True)


def _summary(latencies: list[float], wall_s: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {"asks": len(ordered), "wall_s": round(wall_s, 3), "asks_per_s": round(len(ordered) / wall_s, 1),
            "p50_ms": round(1000 * statistics.median(ordered), 1),
            "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
            "max_ms": round(1000 * ordered[-1], 1)}


async def run(asks: int, nodes: int, devices_per_node: int) -> dict[str, object]:
    """Both rounds against a fresh stack; the figures."""
    async with running_stack(StackConfig(nodes=nodes, devices_per_node=devices_per_node)) as stack:
        client, queue = stack.client, stack.task_queue
        await ask(client, queue, _request(asks * 2, devices_per_node))  # start the guard, read the fleet

        async def one(n: int) -> float:
            started = time.perf_counter()
            answer = await ask(client, queue, _request(n, devices_per_node))
            assert answer.granted, answer
            return time.perf_counter() - started

        started = time.perf_counter()
        sequential = [await one(n) for n in range(asks)]
        seq = _summary(sequential, time.perf_counter() - started)
        started = time.perf_counter()
        burst = list(await asyncio.gather(*(one(asks + n) for n in range(asks))))
        par = _summary(burst, time.perf_counter() - started)
        handle = client.get_workflow_handle(GUARD_WORKFLOW_ID)
        status = await handle.query("status", result_type=GuardStatus)
        for n in range(2 * asks + 1):
            await handle.signal("release", PermitRelease(incident_id=f"bench/{n}"))
        desc = await handle.describe()
        return {"benchmark": "guard", "sequential": seq, "burst": par, "permits_held": status.devices_tainted,
                "fleet_devices": (status.fleet.drivers.get(DRIVER) if status.fleet else None),
                "guard_history_events": desc.raw_description.workflow_execution_info.history_length}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.fleet_guard``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_guard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--asks", type=int, default=200, help="asks per round (default %(default)s)")
    parser.add_argument("--nodes", type=int, default=125, help="simulated nodes (default %(default)s)")
    parser.add_argument("--devices-per-node", type=int, default=8, help="GPUs per node (default %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/guard.json"), help="JSON results")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.asks, args.nodes, args.devices_per_node))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    for name in ("sequential", "burst"):
        f = figures[name]
        assert isinstance(f, dict)
        print(f"{name:<10} {f['asks']} asks in {f['wall_s']}s: {f['asks_per_s']} asks/s, p50 {f['p50_ms']} ms, "
              f"p95 {f['p95_ms']} ms, max {f['max_ms']} ms")
    print(f"permits held {figures['permits_held']}, fleet {figures['fleet_devices']} devices, "
          f"guard history {figures['guard_history_events']} events; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
