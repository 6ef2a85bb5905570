"""``python -m benchmarks memory``: RSS of the worker and the ingest with open incidents and a large cluster.

A fresh stack with a NODES-node simulated cluster (8 GPUs each) and ``podmedic ingest`` as a
child process watching it (pods, ResourceSlices, Events; no HTTP). RSS (VmRSS) of the worker
and the ingest is read idle, after the ingest listed the cluster, and with INCIDENTS incidents
open at once: every one tainted its device and waits for it to heal (the benchmark policy with
a one-hour heal wait), i.e. each incident's workflow is cached in the worker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fleet import Fault, deliverer, health_event
from benchmarks.results import write
from benchmarks.settings import bench_policy, stack_config
from benchmarks.stack import ROOT, running_stack
from benchmarks.stats import load_1m, machine

# Devices without pods fail (nothing to restart): the incident taints and waits for the heal.
HEAL_WAIT_S = 3600.0


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """VmRSS of ``pid`` in MiB (``VmHWM``: its peak so far; 0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


async def _phase_counts(client: Any) -> int:
    query = 'WorkflowType = "DeviceIncident" AND ExecutionStatus = "Running" AND PodmedicPhase = "AwaitingHeal"'
    return int((await client.count_workflows(query)).count)


async def run_memory(incidents: int, nodes: int, progress: Any = print) -> dict[str, Any]:
    """Measure; returns the figures."""
    rows: list[dict[str, Any]] = []
    async with running_stack(stack_config("tuned", nodes)) as stack:
        worker = stack.pids["worker"]
        await asyncio.sleep(3)
        rows.append({"what": "worker, idle", "rss_mib": rss_mib(worker)})
        log = open(stack.workdir / "logs" / "ingest.log", "ab")  # noqa: SIM115 (closed below)
        ingest = subprocess.Popen([sys.executable, "-m", "workers.cli.main", "ingest", "--temporal-address",
                                   stack.temporal_address, "--task-queue", stack.task_queue, "--kubeconfig",
                                   str(stack.kubeconfig), "--no-http", "--state-dir", str(stack.workdir / "ingest")],
                                  cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            await asyncio.sleep(5)
            rows.append({"what": "ingest, started", "rss_mib": rss_mib(ingest.pid)})
            settled = await _settle_rss(ingest.pid, 120)
            rows.append({"what": f"ingest, {nodes} nodes ({nodes * 8} devices, {nodes} ResourceSlices) listed "
                                 "and watched", "rss_mib": settled})
            progress(f"[memory] ingest {settled} MiB watching {nodes} nodes")
            delivery = deliverer(stack.client, bench_policy(close={"heal_wait_s": HEAL_WAIT_S}), stack.task_queue)
            gate = asyncio.Semaphore(50)

            async def one(i: int) -> None:
                node = f"node-{i // 8:04d}"
                async with gate:
                    await delivery.deliver(health_event(f"gpu.nvidia.com/{node}/gpu-{i % 8}", node, Fault()))

            await asyncio.gather(*(one(i) for i in range(incidents)))
            deadline = time.monotonic() + 600
            while await _phase_counts(stack.client) < incidents and time.monotonic() < deadline:
                await asyncio.sleep(2)
            waiting = await _phase_counts(stack.client)
            rows.append({"what": f"worker, {waiting} incidents open (tainted, awaiting heal)",
                         "rss_mib": rss_mib(worker)})
            rows.append({"what": f"ingest, with those {waiting} incidents open", "rss_mib": rss_mib(ingest.pid)})
            progress(f"[memory] worker {rows[-2]['rss_mib']} MiB with {waiting} open incidents")
        finally:
            ingest.send_signal(signal.SIGTERM)
            try:
                ingest.wait(timeout=15)
            except subprocess.TimeoutExpired:
                ingest.kill()
            log.close()
    return {"benchmark": "memory", "machine": machine(), "incidents": incidents, "nodes": nodes, "rows": rows,
            "open_incidents": waiting, "load_1m": load_1m(),
            "description": f"A {nodes}-node simulated cluster ({nodes * 8} GPUs) watched by `podmedic ingest`; "
                           f"{incidents} incidents open at once in `podmedic worker` (each tainted its device "
                           f"and waits up to {HEAL_WAIT_S:g} s for it to heal). RSS = VmRSS; pid {os.getpid()} "
                           "is the benchmark, not measured."}


async def _settle_rss(pid: int, timeout_s: float) -> float:
    """RSS once it stops growing by more than 1 MiB in 3 s (the initial lists are done)."""
    deadline, last = time.monotonic() + timeout_s, -10.0
    while time.monotonic() < deadline:
        now = rss_mib(pid)
        if abs(now - last) < 1.0:
            return now
        last = now
        await asyncio.sleep(3)
    return rss_mib(pid)


def memory_table(r: dict[str, Any]) -> str:
    """The memory figures as plain text."""
    return "\n".join([r["description"], *(f"  {row['what']:<78}{row['rss_mib']:>8.1f} MiB" for row in r["rows"])])


def run_and_print(incidents: int, nodes: int, out: Path) -> dict[str, Any]:
    """The command's body."""
    results = asyncio.run(run_memory(incidents, nodes))
    print(memory_table(results))
    write(results, out)
    return results
