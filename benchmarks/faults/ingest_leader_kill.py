"""Scenario (f): two ingest replicas, the leader SIGKILLed in the middle of a burst of failures.

A second replica joins the stack's ingest; the first, started long before, holds the Lease and runs
the cluster watches (workers/ingest/leader.py). Half the devices fail and their incidents open;
the leader is SIGKILLed and the other half fail at once. Only the cluster watches can open those:
the node agent posts to the killed replica, and keeps its reports until that replica is back. So
the standby must take the Lease once it expires, list, and open every one; the devices of the first
half it lists again must not get a second incident. Then the killed replica comes back (and stands
by), the second leaves as on a rollout (releasing the Lease), and every incident must end as the
others do: one rule, one reschedule, one ticket.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from benchmarks.faults.effects import ScenarioResult, conclude
from benchmarks.faults.harness import Harness, Incident, wait_for
from podmedic.kube.gateway import KubeGateway

LEASE = ("default", "podmedic-ingest")


def _holder(kubeconfig: Path) -> str:
    kube = KubeGateway(kubeconfig)
    try:
        lease = kube.get_lease(*LEASE)
    finally:
        kube.close()
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _identity(h: Harness, role: str) -> str:
    return (h.stack.dir / role / "leader-identity").read_text().strip()


async def _opened(h: Harness, incidents: list[Incident]) -> None:
    for incident in incidents:
        async def started(incident: Incident = incident) -> bool | None:
            return await h.describe(incident) is not None or None
        await wait_for(started, 60, f"{incident.device}'s incident to open")


async def run(h: Harness, quick: bool) -> ScenarioResult:
    """Kill the leading ingest mid-burst; the standby must open what it missed, and nothing twice."""
    per_half = 2 if quick else 4
    result = ScenarioResult("ingest leader SIGKILL",
                            "two ingest replicas; the leader killed between two halves of a burst of failures")
    since, started = time.time(), time.monotonic()
    await h.reset_ledger()
    incidents = await h.start_jobs(2 * per_half, "lead")
    kubeconfig = Path(str(h.stack.endpoints["kubeconfig"]))
    await asyncio.to_thread(h.stack.add_ingest_replica, "ingest-2")
    leader, standby = _identity(h, "ingest"), _identity(h, "ingest-2")
    holder = await asyncio.to_thread(_holder, kubeconfig)
    if holder != leader:
        result.notes.append(f"the first ingest was not the leader ({holder!r}): nothing proven")
        result.lost_events += 1
    for incident in incidents[:per_half]:
        await h.fail(incident)
    await _opened(h, incidents[:per_half])
    h.stack.kill("ingest", signal.SIGKILL)
    killed = time.monotonic()
    result.faults_injected += 1
    for incident in incidents[per_half:]:
        await h.fail(incident)

    async def taken() -> bool | None:
        return await asyncio.to_thread(_holder, kubeconfig) == standby or None
    await wait_for(taken, 60, "the standby ingest to take the Lease")
    result.notes.append(f"leader SIGKILLed after {per_half} failures, {per_half} more at once; the standby led "
                        f"{time.monotonic() - killed:.1f}s later (lease duration 15 s)")
    await _opened(h, incidents[per_half:])  # by the standby's watches: the agent cannot reach the dead replica
    await asyncio.to_thread(h.stack.respawn, "ingest")
    await asyncio.to_thread(h.stack.remove, "ingest-2")
    result = await conclude(h, result, incidents, since, timeout_s=240)
    result.seconds = round(time.monotonic() - started, 1)
    return result
