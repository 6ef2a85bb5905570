"""``python -m benchmarks faults``: start the stack, run every scenario, print and write the table.

The stack is ``podmedic up``'s, each part its own process: the Temporal dev server (SQLite in
the work dir, so a restart finds the same database), the simulator, the vendor desk, the
worker and the ingest. Scenarios run one after the other on it, each counting its own
effects; ``--quick`` runs a smaller version of each (for ``make test``).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.faults import api_faults, fail_fast, ingest_kill, ingest_leader_kill, server_restart, worker_kill
from benchmarks.faults.effects import ScenarioResult
from benchmarks.faults.harness import Harness
from benchmarks.faults.policy import POLICY
from benchmarks.faults.report import Report
from workers.stack.up import Stack, StackOptions

log = logging.getLogger("podmedic.bench.faults")
Scenario = Callable[[Harness, bool], Awaitable[ScenarioResult]]
SCENARIOS: dict[str, Scenario] = {
    "worker-kill": worker_kill.run,
    "server-restart": server_restart.run,
    "ingest-kill": ingest_kill.run,
    "ingest-leader-kill": ingest_leader_kill.run,
    "api-faults": api_faults.run,
    "fail-fast": fail_fast.run,
}


@dataclass(frozen=True)
class SuiteOptions:
    """What the suite runs."""

    quick: bool = False
    only: tuple[str, ...] = ()
    keep_dir: Path | None = None
    nodes: int = 8
    devices_per_node: int = 4
    vendor_resolve_s: float = 4.0


async def _scenarios(stack: Stack, opts: SuiteOptions) -> list[ScenarioResult]:
    h = await Harness.open(stack)
    results = []
    try:
        for name, scenario in SCENARIOS.items():
            if opts.only and name not in opts.only:
                continue
            log.warning("scenario %s starting", name)
            try:
                result = await scenario(h, opts.quick)
            except Exception as exc:  # one broken scenario is a row, the others still run
                log.exception("scenario %s broke", name)
                result = ScenarioResult(name, "scenario broke", notes=[f"{type(exc).__name__}: {exc}"], incidents=1)
                await h.clear_api_faults()
            print(f"  {result.scenario}: {result.completed}/{result.incidents} completed, "
                  f"{result.duplicated_effects} duplicated, {result.lost_events} lost, {result.seconds}s", flush=True)
            results.append(result)
    finally:
        await h.close()
    return results


def run(opts: SuiteOptions) -> Report:
    """Start the stack under a work dir, run the scenarios, stop the stack."""
    with tempfile.TemporaryDirectory(prefix="podmedic-faults-") as tmp:
        workdir = opts.keep_dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        policy = workdir / "policy.yaml"
        policy.write_text(POLICY)
        started = time.monotonic()
        stack = Stack(StackOptions(state_dir=workdir, policy=policy, nodes=opts.nodes,
                                   devices_per_node=opts.devices_per_node, vendor_resolve_s=opts.vendor_resolve_s,
                                   task_queue="podmedic-faults", supervise=False))
        with stack:
            print(f"python -m benchmarks faults: stack up under {workdir} in {time.monotonic() - started:.1f}s",
                  flush=True)
            results = asyncio.run(_scenarios(stack, opts))
        return Report(results=results, quick=opts.quick, seconds=round(time.monotonic() - started, 1))


def run_and_report(opts: SuiteOptions, out: Path, doc: Path | None, command: str) -> Report:
    """The command's body: run, print the table, write the JSON (and the Markdown page)."""
    report = run(opts)
    report.print_table()
    report.write_json(out, command)
    if doc is not None:
        report.write_markdown(doc, command)
    print(f"written to {out}" + (f" and {doc}" if doc else ""))
    return report
