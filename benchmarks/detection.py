"""``python -m benchmarks detection``: how fast health events become running incidents.

Two scenarios, against a stack this command starts itself (``benchmarks.stack``) and the
HTTP ingest served in this process, with the load sent from a child process:

(a) throughput: ``devices`` distinct devices each repeating the same failure, ``events`` in
    all, once as single structured events and once as batches. Prints events/s accepted
    (answered 202, i.e. delivered or deduplicated), how many were deduplicated and how many
    Temporal round trips the deliverer made.
(b) burst: ``burst_devices`` distinct devices (every simulated GPU) failing at once. For
    each incident: from the event's send time to its workflow running (the first
    ``WorkflowTaskCompleted`` in its history), p50/p99/max, and the time until all run.
"""

from __future__ import annotations

import asyncio
import cProfile
import datetime as dt
import json
import os
import pstats
import re
import secrets
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from benchmarks.fleet import wait_closed
from benchmarks.load import LoadResult, LoadSpec, run_in_child
from benchmarks.settings import unguarded_default_policy
from benchmarks.stack import BenchStack, StackConfig, running_stack
from benchmarks.stats import percentile
from workers.ingest.dedup import RecentStates
from workers.ingest.delivery import Deliverer
from workers.ingest.http.app import build_app, start_site
from workers.ingest.settings import HttpSettings, IngestSettings

DRIVER = "gpu.nvidia.com"
TARGET_EVENTS_PER_S = 2000.0
TARGET_ALL_RUNNING_S = 30.0


class DetectionOptions(BaseModel):
    """Knobs of the benchmark (CLI flags)."""

    events: int = Field(20_000, ge=1)
    devices: int = Field(100, ge=1)
    concurrency: int = Field(64, ge=1)
    batch: int = Field(100, ge=2)
    batch_concurrency: int = Field(4, ge=1)
    nodes: int = Field(125, ge=1)
    devices_per_node: int = Field(8, ge=1)
    burst_concurrency: int = Field(250, ge=1)
    temporal_dynamic: list[str] = Field(default_factory=list, description="Dev server dynamic config KEY=VALUE.")
    profile: Path | None = Field(None, description="Write a cProfile of the ingest during (a) singles here.")


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values, default=0.0)}


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU time used so far by this process (``ingest``) and each child of the stack."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {"ingest": time.process_time()}
    for role, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[role] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return used


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU time used so far by ``pid``'s live threads, summed by kernel name without its number
    (``kube_3`` -> ``kube``; ``podmedic.telemetry.thread_names``). ``python`` is the main thread (the
    asyncio loop, where the Temporal SDK handles tasks) and every thread left unnamed; a thread that
    has ended takes its time with it."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        group = re.sub(r"[_-]\d+$", "", name)
        used[group] = used.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return used


def _cpu_since(before: dict[str, float], pids: dict[str, int]) -> dict[str, float]:
    after = cpu_seconds(pids)
    return {role: round(after[role] - before.get(role, 0.0), 2) for role in after}


async def _throughput(url: str, token: str, stack: BenchStack, deliverer: Deliverer, opts: DetectionOptions,
                      batch: int, label: str) -> dict[str, Any]:
    devices = [(DRIVER, f"bench-{label}-{i // 8:03d}", f"gpu-{i % 8}") for i in range(opts.devices)]
    trips, dedup = deliverer.delivered, deliverer.deduplicated
    cpu = cpu_seconds(stack.pids)
    spec = LoadSpec(url=url, token=token, devices=devices, events=opts.events, batch=batch,
                    concurrency=opts.concurrency if batch == 1 else opts.batch_concurrency, run=label)
    result = await run_in_child(spec)
    return {
        "mode": label, "events": opts.events, "requests": result.requests, "batch": batch,
        "concurrency": spec.concurrency, "elapsed_s": round(result.elapsed_s, 3),
        "events_per_s": round(result.events_accepted / result.elapsed_s, 1),
        "accepted": result.events_accepted, "deduplicated": deliverer.deduplicated - dedup,
        "round_trips": deliverer.delivered - trips, "statuses": result.status_counts,
        "cpu_s": {**_cpu_since(cpu, stack.pids), "load": result.cpu_s},
    }


async def _first_task_done(client: Client, workflow_id: str) -> float | None:
    """Wall time of the first WorkflowTaskCompleted of the workflow's latest run, if there is one yet."""
    try:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
    except Exception:  # not visible yet
        return None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return event.event_time.ToDatetime(tzinfo=dt.UTC).timestamp()
    return None


async def _running_at(client: Client, workflow_id: str, deadline: float) -> float | None:
    """``_first_task_done``, waiting for it until ``deadline``."""
    while time.time() < deadline:
        done = await _first_task_done(client, workflow_id)
        if done is not None:
            return done
        await asyncio.sleep(0.5)
    return None


async def _settle(client: Client, probes: list[str], deadline: float) -> None:
    """Wait until the last incidents sent are running, probing only those few: fetching a
    thousand histories while incidents start would load the very server being measured."""
    while time.time() < deadline:
        if None not in await asyncio.gather(*(_first_task_done(client, wid) for wid in probes)):
            return
        await asyncio.sleep(2.0)


async def _burst(url: str, token: str, stack: BenchStack, deliverer: Deliverer,
                 opts: DetectionOptions) -> dict[str, Any]:
    devices = [(DRIVER, f"node-{n:04d}", f"gpu-{g}") for n in range(opts.nodes) for g in range(opts.devices_per_node)]
    trips = deliverer.delivered
    spec = LoadSpec(url=url, token=token, devices=devices, events=len(devices), concurrency=opts.burst_concurrency,
                    run="burst", record=True)
    cpu = cpu_seconds(stack.pids)
    result: LoadResult = await run_in_child(spec)
    sent = {s.devices[0]: s for s in result.sends}
    deadline = time.time() + 300
    last = sorted(sent, key=lambda r: sent[r].sent)[-5:]
    await _settle(stack.client, [f"device/{r}" for r in last], deadline)
    gate = asyncio.Semaphore(16)

    async def one(resource_id: str) -> float | None:
        async with gate:
            return await _running_at(stack.client, f"device/{resource_id}", deadline)

    ids = list(sent)
    running = dict(zip(ids, await asyncio.gather(*(one(r) for r in ids)), strict=True))
    started = [r for r in ids if running[r] is not None]
    latencies = [running[r] - sent[r].sent for r in started]  # type: ignore[operator]
    accept = [s.answered - s.sent for s in result.sends]
    latest = max((running[r] for r in started), default=None)  # type: ignore[type-var]
    all_running = (latest - result.first_sent) if latest is not None and len(started) == len(ids) else None
    return {
        "devices": len(ids), "concurrency": spec.concurrency, "statuses": result.status_counts,
        "round_trips": deliverer.delivered - trips, "send_s": round(result.elapsed_s, 3),
        "accept_latency_s": {k: round(v, 3) for k, v in _summary(accept).items()},
        "send_to_running_s": {k: round(v, 3) for k, v in _summary(latencies).items()},
        "running": len(started), "not_running": len(ids) - len(started),
        "all_running_after_s": round(all_running, 3) if all_running is not None else None,
        "cpu_s": {**_cpu_since(cpu, stack.pids), "load": result.cpu_s},
    }


async def _warm_up(url: str, token: str, stack: BenchStack) -> None:
    """One incident end to end first: the worker process is up and every cache is warm."""
    spec = LoadSpec(url=url, token=token, devices=[(DRIVER, "bench-warmup", "gpu-0")], events=1, concurrency=1,
                    run=f"warm-{secrets.token_hex(4)}")
    await run_in_child(spec)
    if await _running_at(stack.client, f"device/{DRIVER}/bench-warmup/gpu-0", time.time() + 60) is None:
        raise RuntimeError("the warm-up incident never ran: is the worker up? (see its log in the work dir)")


async def run_detection(opts: DetectionOptions) -> dict[str, Any]:
    """Start the stack, run (a) and (b), stop everything; returns the figures."""
    token = secrets.token_urlsafe(24)
    config = StackConfig(nodes=opts.nodes, devices_per_node=opts.devices_per_node,
                         temporal_args=tuple(f"--dynamic-config-value={kv}" for kv in opts.temporal_dynamic))
    async with running_stack(config) as stack:
        settings = IngestSettings(http=HttpSettings(port=0, allow_unauthenticated=False, token_env=None,
                                                    token_file=_token_file(stack.workdir, token)))
        deliverer = Deliverer(stack.client, unguarded_default_policy(), stack.task_queue,
                              dedup=RecentStates(settings.dedup.ttl_s, settings.dedup.max_entries))
        runner, url = await start_site(build_app(deliverer, settings), settings.http)
        try:
            await _warm_up(url, token, stack)
            profiler = cProfile.Profile() if opts.profile else None
            if profiler:
                profiler.enable()
            singles = await _throughput(url, token, stack, deliverer, opts, 1, "single")
            if profiler:
                profiler.disable()
                _write_profile(profiler, opts.profile)  # type: ignore[arg-type]
            batches = await _throughput(url, token, stack, deliverer, opts, opts.batch, "batch")
            still = await wait_closed(stack.client, 120)  # quarantined throughput incidents end
            burst = await _burst(url, token, stack, deliverer, opts)
        finally:
            await runner.cleanup()
    return {
        "benchmark": "detection", "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(), "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "options": opts.model_dump(mode="json"), "throughput": [singles, batches],
        "incidents_running_before_burst": still, "burst": burst,
        "targets": {"events_per_s": TARGET_EVENTS_PER_S, "all_running_s": TARGET_ALL_RUNNING_S},
    }


def _token_file(workdir: Path, token: str) -> Path:
    path = workdir / "ingest-token"
    path.write_text(token)
    path.chmod(0o600)
    return path


def _write_profile(profiler: cProfile.Profile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(40)


def _cpu_line(cpu: dict[str, float]) -> str:
    return ", ".join(f"{role} {seconds:.1f}" for role, seconds in cpu.items())


def table(results: dict[str, Any]) -> str:
    """The figures as a plain-text table, with each target's verdict."""
    lines = ["(a) throughput, repeated events of distinct devices",
             f"  {'mode':<8}{'events':>8}{'requests':>10}{'conc':>6}{'seconds':>9}{'events/s':>10}"
             f"{'dedup':>8}{'round trips':>13}  target >= {TARGET_EVENTS_PER_S:g}/s"]
    for row in results["throughput"]:
        verdict = "met" if row["events_per_s"] >= TARGET_EVENTS_PER_S else "MISSED"
        lines.append(f"  {row['mode']:<8}{row['accepted']:>8}{row['requests']:>10}{row['concurrency']:>6}"
                     f"{row['elapsed_s']:>9.2f}{row['events_per_s']:>10.0f}{row['deduplicated']:>8}"
                     f"{row['round_trips']:>13}  {verdict}")
        lines.append(f"  {'':<8}CPU s: {_cpu_line(row['cpu_s'])}; ingest "
                     f"{row['cpu_s']['ingest'] / max(row['accepted'], 1) * 1e6:.0f} us/event")
    b = results["burst"]
    lat, acc = b["send_to_running_s"], b["accept_latency_s"]
    all_running = b["all_running_after_s"]
    verdict = "met" if all_running is not None and all_running <= TARGET_ALL_RUNNING_S else "MISSED"
    lines += [f"(b) burst: {b['devices']} devices failing at once (concurrency {b['concurrency']})",
              f"  202 answered:          p50 {acc['p50']:.3f}s  p99 {acc['p99']:.3f}s  max {acc['max']:.3f}s",
              f"  send -> running:       p50 {lat['p50']:.3f}s  p99 {lat['p99']:.3f}s  max {lat['max']:.3f}s",
              f"  all {b['running']}/{b['devices']} running after "
              f"{'never' if all_running is None else f'{all_running:.2f}s'}  "
              f"(target <= {TARGET_ALL_RUNNING_S:g}s: {verdict}); Temporal round trips {b['round_trips']}",
              f"  CPU s until all histories were read: {_cpu_line(b['cpu_s'])}",
              f"machine: {results['cpus']} CPUs, 1-min load average at the end {results['load_average_1m_at_end']}"]
    return "\n".join(lines)


def run_and_report(opts: DetectionOptions, out: Path) -> dict[str, Any]:
    """Run the benchmark, print the table and write the JSON to ``out``."""
    results = asyncio.run(run_detection(opts))
    print(table(results))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"results written to {out}")
    return results
