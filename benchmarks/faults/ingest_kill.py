"""Scenario (c): the ingest killed right after it answered 202, and started again.

Two ways an event could be lost. (1) HTTP: a detector's CloudEvent reports a device the simulator
keeps healthy (so no cluster watch or node agent can open its incident: only the HTTP path can), it
must be answered 202, and the ingest is SIGKILLed at once: 202 promises the event reached its
incident (``workers/ingest/delivery.py``), so its id must be in the incident's history. An answer
other than 202, or no event recorded, fails the scenario. (2) Watch: the ingest is SIGKILLed, the
device fails while it is down, and the restarted ingest must see it from its saved watch position:
the incident must open and finish.
"""

from __future__ import annotations

import signal
import time
import uuid

from benchmarks.faults.effects import ScenarioResult, conclude
from benchmarks.faults.harness import Harness


async def run(h: Harness, quick: bool) -> ScenarioResult:
    """Kill the ingest after a 202, and while a device fails; nothing may be lost."""
    rounds = 1 if quick else 2
    result = ScenarioResult("ingest SIGKILL", "ingest killed right after answering 202, and while a device failed")
    since, started = time.time(), time.monotonic()
    await h.reset_ledger()
    incidents = await h.start_jobs(2 * rounds, "ing")
    for i in range(rounds):
        by_http, by_watch = incidents[2 * i], incidents[2 * i + 1]
        status = await h.send_event(by_http, f"ingest-kill-{uuid.uuid4().hex[:8]}")
        if status != 202:
            result.lost_events += 1
            result.notes.append(f"{by_http.device}: the HTTP event was answered {status}, not 202")
        h.stack.kill("ingest", signal.SIGKILL)
        result.faults_injected += 1
        h.stack.respawn("ingest")
        result.notes.append(f"HTTP event answered {status}, ingest SIGKILLed at once")
        h.stack.kill("ingest", signal.SIGKILL)
        result.faults_injected += 1
        await h.fail(by_watch)
        h.stack.respawn("ingest")
        result.notes.append("ingest SIGKILLed, device failed while it was down, ingest restarted")
    result = await conclude(h, result, incidents, since, timeout_s=240)
    for incident in incidents[0::2]:  # the HTTP ones: each must have its accepted event in its history
        if not incident.events_sent:
            result.notes.append(f"{incident.device}: no event was accepted, so nothing was proven")
            result.lost_events += 1
            continue
        missing = set(incident.events_sent) - await h.signalled_ids(incident)
        result.lost_events += len(missing)
        result.notes += [f"{incident.device}: event {m} answered 202 but not in the history" for m in missing]
    result.seconds = round(time.monotonic() - started, 1)
    return result
