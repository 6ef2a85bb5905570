"""The fleet guard's arithmetic and its policy section, one function at a time."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from podmedic.domain.fleet_guard import limits as limits
from podmedic.domain.fleet_guard.messages import (
    FleetSize,
    Ledger,
    PermitAnswer,
    PermitRequest,
    Sighting,
    StormRecord,
)
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_file import PolicyError, load_policy, parse_policy

T0 = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
DRIVER = "gpu.nvidia.com"
FLEET = FleetSize(drivers={DRIVER: 40}, pools={f"{DRIVER}/node-{n}": 8 for n in range(5)})


def ask(node: int, gpu: int, policy: GuardPolicy, *, override: str | None = None) -> PermitRequest:
    return PermitRequest(incident_id=f"device/{DRIVER}/node-{node}/gpu-{gpu}",
                         device=DeviceRef(driver=DRIVER, pool=f"node-{node}", device=f"gpu-{gpu}"),
                         node=f"node-{node}", step="taint", policy=policy, override_by=override)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def take(ledger: Ledger, req: PermitRequest, now: dt.datetime) -> PermitAnswer:
    """What the guard workflow does with one ask."""
    limits.observe(ledger, req, now)
    answer = limits.evaluate(ledger, req, FLEET, now)
    if answer.granted:
        limits.grant(ledger, req, now)
    return answer


@pytest.mark.parametrize(("share", "size", "floor", "expected"),
                         [(0.1, 40, 3, 4), (0.1, 8, 3, 3), (0.5, 8, 3, 4), (0.3, 10, 1, 3), (0.1, 0, 2, 2)])
def test_allowed_is_the_share_rounded_down_but_never_below_the_floor(share: float, size: int, floor: int,
                                                                     expected: int) -> None:
    assert limits.allowed(share, size, floor) == expected


def test_devices_at_once_limit_holds_the_next_device_and_frees_on_release() -> None:
    policy = GuardPolicy(max_devices_tainted=2, max_driver_share=1, max_pool_share=1)
    ledger = Ledger()
    assert take(ledger, ask(0, 0, policy), at(0)).granted
    assert take(ledger, ask(1, 0, policy), at(1)).granted
    held = take(ledger, ask(2, 0, policy), at(2))
    assert not held.granted and held.limit == "devices_tainted"
    assert "2 devices under remediation; limit 2" in held.detail
    assert take(ledger, ask(0, 0, policy), at(3)).granted  # a holder asking for its next step
    assert limits.release(ledger, ask(0, 0, policy).incident_id)
    assert take(ledger, ask(2, 0, policy), at(4)).granted


def test_nodes_limit_counts_distinct_nodes_so_a_second_device_of_a_disrupted_node_goes() -> None:
    policy = GuardPolicy(max_nodes_disrupted=1, max_driver_share=1, max_pool_share=1)
    ledger = Ledger()
    assert take(ledger, ask(0, 0, policy), at(0)).granted
    assert take(ledger, ask(0, 1, policy), at(1)).granted
    held = take(ledger, ask(1, 0, policy), at(2))
    assert held.limit == "nodes_disrupted" and "1 nodes disrupted; limit 1" in held.detail


def test_driver_share_counts_grants_in_the_window_even_after_release() -> None:
    policy = GuardPolicy(max_driver_share=0.1, max_pool_share=1, min_devices=1, window_s=600)
    ledger = Ledger()
    for n in range(4):  # 10% of 40
        assert take(ledger, ask(n, 0, policy), at(n)).granted
        limits.release(ledger, ask(n, 0, policy).incident_id)
    held = take(ledger, ask(4, 0, policy), at(10))
    assert held.limit == "driver_share" and "4 of 40 gpu.nvidia.com devices remediated within 600s" in held.detail
    limits.prune(ledger, policy, at(601))
    assert take(ledger, ask(4, 0, policy), at(601)).granted  # the window moved on


def test_pool_share_and_its_floor() -> None:
    policy = GuardPolicy(max_driver_share=1, max_pool_share=0.25, min_devices=3)
    ledger = Ledger()
    for gpu in range(3):  # 25% of 8 is 2, but the floor lets 3 through
        assert take(ledger, ask(0, gpu, policy), at(gpu)).granted
    held = take(ledger, ask(0, 3, policy), at(5))
    assert held.limit == "pool_share" and "pool gpu.nvidia.com/node-0" in held.detail


def test_a_device_counts_once_toward_a_share_when_its_incident_asks_again() -> None:
    # Four devices of one node fenced (4 of 8 = the 50% share), permits given back; the fourth
    # asks again for its reschedule: it is one of the four, not a fifth.
    policy = GuardPolicy(max_driver_share=1, max_pool_share=0.5, min_devices=3)
    ledger = Ledger()
    for gpu in range(4):
        assert take(ledger, ask(0, gpu, policy), at(gpu)).granted
        limits.release(ledger, ask(0, gpu, policy).incident_id)
    assert take(ledger, ask(0, 3, policy), at(10)).granted
    held = take(ledger, ask(0, 4, policy), at(11))  # a fifth device is over the share
    assert held.limit == "pool_share" and "4 of 8" in held.detail


def test_a_node_incidents_permit_is_not_one_more_device_of_its_pool() -> None:
    # All 8 devices of node-0 fail (a 100% share allows them all); the node incident that
    # quarantines the node holds a permit too, but its devices count through their own incidents.
    policy = GuardPolicy(max_driver_share=1, max_pool_share=1.0, max_devices_tainted=50)
    ledger = Ledger()
    for gpu in range(7):
        assert take(ledger, ask(0, gpu, policy), at(gpu)).granted
    node = ask(0, 0, policy).model_copy(update={"incident_id": "node/node-0", "step": "node_quarantine",
                                                "counts": False})
    assert limits.evaluate(ledger, node, FLEET, at(8)).granted
    limits.grant(ledger, node, at(8), shares=False)
    assert take(ledger, ask(0, 7, policy), at(9)).granted  # the 8th device of 8: within 100%


def test_an_operator_override_goes_past_limits_but_not_past_a_storm() -> None:
    policy = GuardPolicy(max_devices_tainted=1)
    ledger = Ledger()
    take(ledger, ask(0, 0, policy), at(0))
    assert take(ledger, ask(1, 0, policy, override="dana"), at(1)).granted
    assert ledger.permits[ask(1, 0, policy).incident_id].override_by == "dana"
    ledger.storm = StormRecord(tripped_at=at(2), driver=DRIVER, devices=[], nodes=[], unhealthy=12, fleet=40,
                                      share=0.3, window_s=300)
    stormy = take(ledger, ask(2, 0, policy, override="dana"), at(3))
    assert not stormy.granted and stormy.storm and stormy.limit == "storm"


def test_storm_needs_both_the_share_and_the_minimum_within_its_window() -> None:
    policy = GuardPolicy.model_validate({"storm": {"share": 0.25, "window_s": 300, "min_devices": 10}})
    ledger = Ledger()
    for n in range(9):
        limits.observe(ledger, ask(n % 5, n // 5, policy), at(n))
    assert limits.storm(ledger, policy, FLEET, at(9)) is None  # 9 < min_devices
    limits.observe(ledger, ask(4, 7, policy), at(10))
    found = limits.storm(ledger, policy, FLEET, at(10))
    assert found is not None and found.unhealthy == 10 and found.share == 0.25 and len(found.nodes) == 5
    assert limits.storm(ledger, policy, FLEET, at(320)) is None  # the first ones left the window
    ledger.storms_since = at(11)  # an operator resumed: what was seen cannot trip again
    assert limits.storm(ledger, policy, FLEET, at(12)) is None


def test_an_open_incident_counts_once_toward_a_storm() -> None:
    policy = GuardPolicy()
    ledger = Ledger()
    for t in (0, 400, 800):  # asking again long after: still one unhealthy device
        limits.observe(ledger, ask(0, 0, policy), at(t))
        limits.prune(ledger, policy, at(t))
    assert len(ledger.seen) <= 1 and ledger.counted == [ask(0, 0, policy).incident_id]
    limits.release(ledger, ask(0, 0, policy).incident_id)
    assert ledger.counted == []


def sighting(node: int, gpu: int) -> Sighting:
    req = ask(node, gpu, GuardPolicy())
    return Sighting(incident_id=req.incident_id, device=req.device, node=req.node)


def test_devices_the_ingest_saw_count_toward_a_storm_once_with_their_incidents_asks() -> None:
    policy = GuardPolicy.model_validate({"storm": {"share": 0.25, "window_s": 300, "min_devices": 10}})
    ledger = Ledger()
    limits.observe(ledger, ask(0, 0, policy), at(0))  # asked before the ingest's sighting of it arrived
    assert limits.sight(ledger, [sighting(n % 5, n // 5) for n in range(9)], at(1)) == 8
    assert limits.sight(ledger, [sighting(1, 0), sighting(2, 0)], at(2)) == 0  # sent again: nothing new
    assert limits.storm(ledger, policy, FLEET, at(2)) is None  # 9 devices < min_devices
    for n in range(1, 9):  # their incidents ask later: each still one device
        limits.observe(ledger, ask(n % 5, n // 5, policy), at(3))
    assert limits.storm(ledger, policy, FLEET, at(3)) is None
    assert limits.sight(ledger, [sighting(4, 7)], at(4)) == 1
    found = limits.storm(ledger, policy, FLEET, at(4))
    assert found is not None and found.unhealthy == 10 and len(found.devices) == 10
    assert sorted(found.nodes) == [f"node-{n}" for n in range(5)]


def test_unknown_fleet_size_leaves_only_the_at_once_limits() -> None:
    policy = GuardPolicy(max_devices_tainted=2, max_driver_share=0.01, max_pool_share=0.01, min_devices=1)
    ledger = Ledger()
    assert limits.evaluate(ledger, ask(0, 0, policy), FleetSize(), at(0)).granted
    assert limits.storm(ledger, policy, None, at(0)) is None


def test_the_shipped_policy_turns_the_guard_on_and_copies_it_into_every_driver() -> None:
    policies = load_policy(None)
    assert policies.guard is not None and policies.guard.enabled and not policies.guard.dry_run
    for name in [*policies.drivers, "some.other.driver"]:
        assert policies.for_driver(name).guard == policies.guard
        assert not policies.for_driver(name).dry_run


def test_no_guard_section_means_no_guard_and_dry_run_reaches_every_driver() -> None:
    assert parse_policy("drivers: {default: {}}").for_driver("x").guard is None
    engine = parse_policy("guard: {dry_run: true}\ndrivers: {default: {}, gpu.amd.com: {}}")
    assert all(p.dry_run for p in engine.drivers.values())
    one = parse_policy("guard: {}\ndrivers: {default: {}, gpu.amd.com: {dry_run: true}}")
    assert one.for_driver("gpu.amd.com").dry_run and not one.for_driver("gpu.nvidia.com").dry_run
    assert all(p.dry_run for p in one.with_dry_run().drivers.values())


def test_a_bad_guard_section_is_refused_with_the_field_path() -> None:
    with pytest.raises(PolicyError) as refused:
        parse_policy("guard: {on_limit: panic, max_driver_share: 1.5, storm: {clear_s: 0}}\n"
                     "drivers: {default: {}, x: {guard: {enabled: false}}}")
    text = str(refused.value)
    for path in ("guard.on_limit", "guard.max_driver_share", "guard.storm.clear_s", "drivers.x.guard"):
        assert path in text, text


@pytest.mark.parametrize("policy_file", ["workers/stack/demo_policy.yaml", "podmedic/domain/default_policy.yaml"])
def test_the_demos_node_quarantine_is_not_held_by_the_pool_share_its_devices_used(policy_file: str) -> None:
    # `make demo`: node-0000 (a pool of 4 GPUs) sees three hardware faults and an idle device's XID 79.
    # Under the demo's policy all four are remediated (100% share), under the shipped one three (its floor);
    # the node incident's quarantine then adds no device to the pool: its devices are those already counted.
    guard = load_policy(Path(policy_file)).guard
    assert guard is not None and guard.enabled
    demo = FleetSize(drivers={DRIVER: 16}, pools={f"{DRIVER}/node-{n}": 4 for n in range(4)})
    ledger = Ledger()
    for gpu in range(4):
        req = ask(0, gpu, guard)
        limits.observe(ledger, req, at(gpu))
        answer = limits.evaluate(ledger, req, demo, at(gpu))
        if answer.granted:
            limits.grant(ledger, req, at(gpu))
    assert len(ledger.permits) >= 3
    node = ask(0, 0, guard).model_copy(update={"incident_id": "node/node-0", "step": "node_quarantine",
                                               "counts": False})
    answer = limits.evaluate(ledger, node, demo, at(5), shares=False)
    assert answer.granted, answer.detail
    # A device's ask is still held by the shares when over them (the shipped policy's fourth device).
    if guard.max_pool_share < 1:
        held = limits.evaluate(ledger, ask(0, 3, guard), demo, at(6))
        assert not held.granted and held.limit.endswith("_share")
