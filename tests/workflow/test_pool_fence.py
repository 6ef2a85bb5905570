"""A storm's pool fence: the ingest starts it once the driver's devices fail fast enough, it fences the
pool first, holds the rule until each device it was told of is fenced on its own, and lets go.

Real time-skipping server and the real ingest counter (``StormFences``); the cluster side is faked
under the real activity names (the rule itself is proven against the simulator in
tests/e2e_node/test_storm_fence_e2e.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.models import DeviceRef, TimelineEntry
from podmedic.domain.node import DeviceIncidentsInput, DeviceIncidentStatus
from podmedic.domain.policy_detection import StormFence
from podmedic.domain.policy_recovery import Effect
from podmedic.domain.pool_fence import PoolDevicesInput, PoolFenceState, PoolRef, PoolRuleInput
from podmedic.domain.steps import TaintResult, UntaintResult
from tests.workflow.fakes import event, incident_worker
from tests.workflow.operator_helpers import own_time_skipping_env
from workers.ingest.storm_fence import StormFences
from workflows.fleet.pool_fence import PoolFenceWorkflow


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of this module's own: time is moved on by hand (``_fence_of``), which
    must not meet what the suites before it left on the shared one."""
    async for server in own_time_skipping_env():
        yield server


RULE = StormFence(devices=3, window_s=60, min_hold_s=300, max_hold_s=3600, poll_s=15)


def _device(pool: str, n: int) -> DeviceRef:
    return DeviceRef(driver="gpu.nvidia.com", pool=pool, device=f"gpu-{n}")


class FakePools:
    """The cluster as the pool fence sees it: rules made and let go, devices' own rules, incidents."""

    def __init__(self, covered_after_looks: int | None = 2) -> None:
        self.calls: Counter[str] = Counter()
        self.covered_after_looks = covered_after_looks  # None: never fenced on their own
        self.fenced: list[PoolRef] = []

    def activities(self) -> list[Any]:
        @activity.defn(name="fence_pool")
        async def fence_pool(inp: PoolRuleInput) -> TaintResult:
            self.calls["fence_pool"] += 1
            self.fenced.append(inp.pool)
            return TaintResult(rule_name=inp.pool.rule_name, created=True, effect=Effect.NO_SCHEDULE)

        @activity.defn(name="unfence_pool")
        async def unfence_pool(inp: PoolRuleInput) -> UntaintResult:
            self.calls["unfence_pool"] += 1
            return UntaintResult(removed=True, detail=f"deleted {inp.pool.rule_name}")

        @activity.defn(name="devices_without_own_rule")
        async def devices_without_own_rule(inp: PoolDevicesInput) -> list[str]:
            self.calls["devices_without_own_rule"] += 1
            done = self.covered_after_looks is not None and self.calls["devices_without_own_rule"] > \
                self.covered_after_looks
            return [] if done else [d.resource_id for d in inp.devices]

        @activity.defn(name="device_incidents_status")
        async def device_incidents_status(inp: DeviceIncidentsInput) -> list[DeviceIncidentStatus]:
            self.calls["device_incidents_status"] += 1
            return [DeviceIncidentStatus(incident_id=i, running=True) for i in inp.incidents]

        return [fence_pool, unfence_pool, devices_without_own_rule, device_incidents_status]


async def _fence_of(env: WorkflowEnvironment, pool: str) -> PoolFenceState:
    """The pool fence's end, moving time on in steps (the time-skipping server's result wait does not)."""
    handle = env.client.get_workflow_handle_for(PoolFenceWorkflow.run,
                                                PoolRef(driver="gpu.nvidia.com", pool=pool).workflow_id)
    for _ in range(400):
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return await handle.result()
        await env.sleep(timedelta(seconds=10))
    raise AssertionError(f"{handle.id} still running after 4000 s")


def _entry(state: PoolFenceState, step: str) -> TimelineEntry:
    return next(e for e in state.timeline if e.step == step)


async def _storm(client: Client, task_queue: str, devices: list[DeviceRef]) -> StormFences:
    fences = StormFences(client, task_queue, search_attributes=False)
    for n, device in enumerate(devices):
        await fences.before(event(device=device, event_id=f"e{n}"), RULE)
    return fences


@pytest.mark.asyncio(loop_scope="session")
async def test_below_the_storm_nothing_is_fenced_and_at_it_every_pool_with_a_failure_is(
        env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakePools(covered_after_looks=0)
    a0, a1, b0 = _device("node-a", 0), _device("node-a", 1), _device("node-b", 0)
    async with incident_worker(client, task_queue, [PoolFenceWorkflow], fake.activities()):
        dry = StormFences(client, task_queue, search_attributes=False)
        for n, device in enumerate([a0, a1, b0]):
            await dry.before(event(device=device, event_id=f"d{n}"), RULE, dry_run=True)
        assert dry.fences_told == 0  # a dry run changes nothing, not even in a storm
        fences = await _storm(client, task_queue, [a0, a1])
        assert fences.fences_told == 0  # two devices: under storm_fence.devices (3)
        await fences.before(event(device=b0, event_id="e2"), RULE)
        # The third device makes the storm: both pools with a failure are fenced, each by one round trip.
        assert fences.fences_told == 2
        await fences.before(event(device=a1, event_id="e3"), RULE)  # told already: no round trip
        assert fences.fences_told == 2
        await fences.before(event(device=_device("node-e", 0), event_id="e4"), RULE)  # in the storm: its pool
        assert fences.fences_told == 3
        state = await _fence_of(env, "node-a")
        await _fence_of(env, "node-e")
    assert state.devices == [a0.resource_id, a1.resource_id]
    assert state.released and state.rule_name == PoolRef.of(a0).rule_name
    assert sorted(p.pool for p in fake.fenced) == ["node-a", "node-b", "node-e"]
    assert "storm: 3 devices of gpu.nvidia.com reported Unhealthy within 60s" in _entry(state, "fence").message
    # One line per report that named new devices: a1 told again added none.
    told = [e.message for e in state.timeline if e.step == "told"]
    assert len(told) == 1 and re.fullmatch(
        rf"{a0.resource_id}, {a1.resource_id} failed \(sent by the ingest at 20\d\d-\d\d-\d\dT[\d:]{{8}}\+00:00\)",
        told[0]), told


@pytest.mark.asyncio(loop_scope="session")
async def test_the_rule_stays_until_every_told_device_has_its_own_then_goes(
        env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakePools(covered_after_looks=2)
    devices = [_device("node-c", n) for n in range(3)]
    async with incident_worker(client, task_queue, [PoolFenceWorkflow], fake.activities()):
        await _storm(client, task_queue, devices)
        state = await _fence_of(env, "node-c")
    fenced_at, released_at = _entry(state, "fence").at, state.timeline[-1].at
    # min_hold_s first, then two looks that found devices unfenced and running, then the third: the first wait
    # poll_s, the second twice that (docs/detection.md: each look that finds one uncovered doubles the wait).
    assert (released_at - fenced_at).total_seconds() == pytest.approx(RULE.min_hold_s + 3 * RULE.poll_s, abs=2)
    assert fake.calls["fence_pool"] == 1 and fake.calls["unfence_pool"] == 1
    assert fake.calls["devices_without_own_rule"] == 3 and fake.calls["device_incidents_status"] == 2
    assert [e.step for e in state.timeline] == ["told", "fence", "hold", "release"]
    assert state.released and state.uncovered == []


@pytest.mark.asyncio(loop_scope="session")
async def test_a_pool_whose_devices_never_get_their_own_rule_is_let_go_at_max_hold(
        env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    fake = FakePools(covered_after_looks=None)
    devices = [_device("node-d", n) for n in range(3)]
    async with incident_worker(client, task_queue, [PoolFenceWorkflow], fake.activities()):
        await _storm(client, task_queue, devices)
        state = await _fence_of(env, "node-d")
    held = (state.timeline[-1].at - _entry(state, "fence").at).total_seconds()
    assert held == pytest.approx(RULE.max_hold_s, abs=RULE.poll_s + 2)
    assert "max_hold_s" in state.timeline[-2].message and devices[0].resource_id in state.timeline[-2].message
    assert state.uncovered == [d.resource_id for d in devices] and fake.calls["unfence_pool"] == 1
    # Looks from min_hold_s on, waits doubling from poll_s up to 8 x poll_s (docs/detection.md): at 300, 315, 345 and
    # 405 s, then every 120 s from 525 s while under max_hold_s (3,525 s the last): 4 + 26.
    assert fake.calls["devices_without_own_rule"] == 30, fake.calls
