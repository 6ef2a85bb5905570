"""A cancelled candidate stops campaigning: killing an ingest replica's task ends its Lease renewals.

Python 3.11's ``asyncio.wait_for`` returns the inner result instead of raising when the cancellation
arrives as the inner await completes (CPython gh-86296, fixed by the 3.12 rewrite on
``asyncio.timeout``). The elector's waits hit that window often enough that a killed replica went on
renewing and no standby could take over (seen in ``tests/e2e_ingest/test_replicas.py``). Here the
elector renews every millisecond against an in-memory Lease (this is a test of the loop, not of the
Lease API: ``tests/ingest_sources/test_leader_election.py`` covers that against the simulator) and
is cancelled at random moments; every cancellation must end it.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from podmedic.domain.base import Obj
from workers.ingest.leader import LeaderElector, LeaseConfig

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROUNDS = 200


class MemoryLeases:
    """One Lease in memory: enough for a lone candidate to acquire and renew."""

    def __init__(self) -> None:
        self.lease: Obj | None = None
        self.writes = 0

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        return self.lease

    def create_lease(self, namespace: str, name: str, spec: Obj) -> Obj:
        self.writes += 1
        self.lease = {"metadata": {"resourceVersion": str(self.writes)}, "spec": dict(spec)}
        return self.lease

    def replace_lease(self, lease: Obj, spec: Obj) -> Obj:
        return self.create_lease("", "", spec)


async def _lead(lost: asyncio.Event) -> None:
    await lost.wait()


async def test_every_cancellation_ends_the_campaign() -> None:
    rng = random.Random(7)
    survived = []
    for round_ in range(ROUNDS):
        leases = MemoryLeases()
        elector = LeaderElector(leases, LeaseConfig("default", "l", "me", 4.0, 3.0, 0.001))
        stop = asyncio.Event()
        task = asyncio.create_task(elector.run(stop, _lead))
        await asyncio.sleep(rng.uniform(0.003, 0.02))
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=1.0)
        if not done:
            survived.append((round_, leases.writes))
            stop.set()
            await asyncio.wait({task}, timeout=1.0)
        elif not task.cancelled():
            survived.append((round_, task.exception()))
    assert not survived, f"{len(survived)} of {ROUNDS} cancelled campaigns went on: {survived[:5]}"
