"""Leader election of the ingest replicas against the simulator's Lease API, over real HTTP.

The expected behaviour is client-go's (k8s.io/client-go/tools/leaderelection/leaderelection.go,
``tryAcquireOrRenew`` and ``release``); the Lease's shape is coordination.k8s.io/v1's (kubernetes/api
coordination/v1/types.go ``LeaseSpec``), which the simulator validates with the strict schema and
upstream's ``ValidateLeaseSpec``. Time is a hand-moved monotonic clock, so expiry is exact.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podmedic.kube.gateway import Conflict, InvalidObject, KubeGateway
from podmedic_sim import SimCluster
from podmedic_sim.validation_lease import MICRO_TIME
from tests.helpers import wait_until
from workers.ingest.leader import LeaderElector, LeaseConfig, default_identity, micro_time


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lease_name() -> str:
    return f"podmedic-ingest-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _elector(kube: KubeGateway, name: str, who: str, clock: Clock | None = None, **timings: float) -> LeaderElector:
    config = LeaseConfig("default", name, who, **timings)
    return LeaderElector(kube, config, clock=clock) if clock else LeaderElector(kube, config)


@pytest.fixture
def pair(kube: KubeGateway, lease_name: str, clock: Clock) -> Iterator[tuple[LeaderElector, LeaderElector]]:
    yield _elector(kube, lease_name, "ingest-a", clock), _elector(kube, lease_name, "ingest-b", clock)


def test_one_candidate_leads_and_the_lease_says_so_as_upstream_writes_it(
    kube: KubeGateway, lease_name: str, pair: tuple[LeaderElector, LeaderElector]
) -> None:
    a, b = pair
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    lease = kube.get_lease("default", lease_name)
    assert lease is not None
    spec = lease["spec"]
    assert spec["holderIdentity"] == "ingest-a" and spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"]), spec
    assert b.holder == "ingest-a"


def test_a_standby_takes_over_only_once_the_lease_expired_by_its_own_clock(
    kube: KubeGateway, lease_name: str, pair: tuple[LeaderElector, LeaderElector], clock: Clock
) -> None:
    a, b = pair
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b first sees the record now
    clock.now += 10
    assert a.try_acquire_or_renew()  # renewed: a new renewTime...
    clock.now += 4
    assert not b.try_acquire_or_renew()  # ...which b sees now, 14 s after its first look: its 15 s start again
    clock.now += 14.5
    assert not b.try_acquire_or_renew(), "b saw the record change 14.5 s ago: not expired"
    clock.now += 1
    assert b.try_acquire_or_renew(), "15 s after b last saw the record change, it has expired"
    lease = kube.get_lease("default", lease_name)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "ingest-b" and lease["spec"]["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew(), "the old leader sees the new holder and stands by"


def test_of_two_candidates_writing_at_once_the_slower_gets_a_conflict(
    kube: KubeGateway, lease_name: str, pair: tuple[LeaderElector, LeaderElector], clock: Clock
) -> None:
    a, b = pair
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 16
    stale = kube.get_lease("default", lease_name)
    assert stale is not None
    assert b.try_acquire_or_renew()  # b takes the expired lease...
    # ...while a, which read the lease before b wrote, writes with that read's resourceVersion
    with pytest.raises(Conflict):
        kube.replace_lease(stale, {**stale["spec"], "holderIdentity": "ingest-a"})
    lease = kube.get_lease("default", lease_name)
    assert lease is not None and lease["spec"]["holderIdentity"] == "ingest-b"


def test_a_released_lease_is_taken_at_once(
    kube: KubeGateway, lease_name: str, pair: tuple[LeaderElector, LeaderElector]
) -> None:
    a, b = pair
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    lease = kube.get_lease("default", lease_name)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "" and lease["spec"]["leaseDurationSeconds"] == 1
    assert b.try_acquire_or_renew(), "no holder: no need to wait out the duration"
    assert kube.get_lease("default", lease_name)["spec"]["leaseTransitions"] == 1  # type: ignore[index]


def test_the_simulator_refuses_a_lease_upstream_refuses(kube: KubeGateway, lease_name: str) -> None:
    for spec, field in (({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds"),
                        ({"leaseTransitions": -1}, "spec.leaseTransitions"),
                        ({"renewTime": "2026-11-26T03:00:00Z"}, "spec.renewTime"),
                        # the kubernetes client re-serializes times with isoformat(): a zero fraction is dropped
                        ({"acquireTime": "2026-11-26T03:00:00.000000Z"}, "spec.acquireTime")):
        with pytest.raises(InvalidObject) as refused:
            kube.create_lease("default", lease_name, spec)
        assert field in str(refused.value), refused.value
    # so podmedic never writes a zero fraction: 1 µs later keeps all six digits through the client
    assert micro_time(dt.datetime(2026, 11, 26, 3, 0, tzinfo=dt.UTC)) == "2026-11-26T03:00:00.000001Z"
    assert kube.create_lease("default", lease_name, {"renewTime": micro_time(dt.datetime(2026, 11, 26, tzinfo=dt.UTC))})


async def test_a_leader_that_cannot_renew_stops_leading_before_the_lease_expires(
    sim: SimCluster, kube: KubeGateway, lease_name: str
) -> None:
    timings = {"lease_duration_s": 3.0, "renew_deadline_s": 1.5, "retry_period_s": 0.2}
    a = _elector(kube, lease_name, "ingest-a", **timings)
    b = _elector(kube, lease_name, "ingest-b", **timings)
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    terms: list[tuple[str, float, float]] = []

    def leader(name: str):  # type: ignore[no-untyped-def]
        async def lead(lost: asyncio.Event) -> None:
            began = asyncio.get_running_loop().time()
            await lost.wait()
            terms.append((name, began, asyncio.get_running_loop().time()))
        return lead

    run_a = asyncio.create_task(a.run(stop_a, leader("a")))
    await asyncio.to_thread(wait_until, lambda: a.leading, timeout=5, what="a leading")
    run_b = asyncio.create_task(b.run(stop_b, leader("b")))
    await asyncio.sleep(0.5)
    assert not b.leading
    sim.add_api_fault(verbs=["update"], resources=["leases"], status=503)  # a's renewals fail from now
    await asyncio.to_thread(wait_until, lambda: not a.leading, timeout=5, what="a to stop leading")
    stop_a.set()  # a is gone (cut off: its release fails too), the Lease still names it
    await run_a
    sim.clear_api_faults()
    await asyncio.to_thread(wait_until, lambda: b.leading, timeout=10, what="b to take over")
    stop_b.set()
    await run_b
    (first, a_from, a_to), (second, b_from, _) = terms
    assert (first, second) == ("a", "b")
    assert a_to - a_from < 0.5 + 1.5 + 0.5, "a stopped within the renew deadline of its last renewal"
    assert b_from >= a_to, "never two leaders at once"
    lease = kube.get_lease("default", lease_name)
    assert lease is not None and lease["spec"]["holderIdentity"] == "", "the last leader released the Lease on stop"


def test_the_identity_is_kept_with_the_cursors(tmp_path: Path) -> None:
    """A container restarted in its pod (same emptyDir) is the same candidate, so it leads again at once;
    two pods (or processes without a state directory) are never the same candidate."""
    kept = default_identity(tmp_path)
    assert default_identity(tmp_path) == kept and kept.startswith(socket.gethostname() + "_")
    assert default_identity(tmp_path / "other") != kept
    assert default_identity() != default_identity()
