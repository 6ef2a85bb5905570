"""Scenario (b): the Temporal dev server stopped mid-incident and started again on the same database.

Two incidents per stop; once the first is past detection (tainting or later), the dev server
gets SIGTERM (clean stop) or SIGKILL (crash), stays down a moment, and starts again with the
same ``--db-filename``. The worker and the ingest keep running and must reconnect on their own;
every incident must finish as if nothing happened, and none may be lost.
"""

from __future__ import annotations

import asyncio
import signal
import time

from benchmarks.faults.effects import ScenarioResult, conclude
from benchmarks.faults.harness import Harness

MID = {"Tainting", "Recovering", "AwaitingHeal", "Ticketing", "AwaitingVendor"}


async def run(h: Harness, quick: bool) -> ScenarioResult:
    """Stop the dev server once per signal while incidents are under way."""
    kinds = [signal.SIGKILL] if quick else [signal.SIGTERM, signal.SIGKILL]
    result = ScenarioResult("dev server restart", "Temporal dev server stopped by "
                            f"{', '.join(k.name for k in kinds)} mid-incident, restarted on the same SQLite DB")
    since, started = time.time(), time.monotonic()
    await h.reset_ledger()
    incidents = await h.start_jobs(2 * len(kinds), "srv")
    for i, sig in enumerate(kinds):
        pair = incidents[2 * i:2 * i + 2]
        await h.fail(pair[0])
        seen = await h.wait_phase(pair[0], MID, 120)
        await h.fail(pair[1])  # its event reaches the ingest while the server goes down
        code = h.stack.kill("temporal", sig)
        result.faults_injected += 1
        await asyncio.sleep(2.0)
        h.stack.respawn("temporal")
        result.notes.append(f"{sig.name}: first incident in phase {seen}, server exit {code}, down ~2 s")
    result = await conclude(h, result, incidents, since, timeout_s=240)
    result.seconds = round(time.monotonic() - started, 1)
    return result
