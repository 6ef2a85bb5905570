"""Seeing a storm at the ingest and fencing whole pools ahead of the device incidents.

The ingest counts the distinct devices of each driver reported Unhealthy within the driver's
``detection.storm_fence.window_s``. From ``devices`` on it is a storm: before a failed device's
own incident is opened, its pool's fence (``workflows/fleet/pool_fence.py``) is started or told of it,
by signal-with-start at the highest task priority. So the device's event is delivered only
after its pool's fence was accepted, and a device never waits for the incidents ahead of it to
be fenced. Pools with failures counted before the storm was recognised are fenced at that moment.

One round trip per pool at a time: the devices of a pool that arrive while its round trip is
under way ride the next one. What the fence is told is only what it waits for before it lets
go; a device whose report to the fence is lost (the ingest stopped) still has its own incident
and rule, from its own event, which is delivered as always.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from podmedic.domain import search
from podmedic.domain import workflow_names as names
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health
from podmedic.domain.policy_detection import StormFence
from podmedic.domain.pool_fence import PoolFenceInput, PoolFenceReport, PoolRef
from podmedic.temporal.priorities import URGENT


@dataclass
class _Pool:
    """What the ingest told one pool's fence, and what it has yet to tell it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    told: dict[str, float] = field(default_factory=dict)  # resource id -> when told (monotonic)
    waiting: dict[str, DeviceRef] = field(default_factory=dict)


class StormFences:
    """Counts each driver's recently failed devices and, in a storm, fences their pools first."""

    def __init__(self, client: Client, task_queue: str, *, search_attributes: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.task_queue = task_queue
        self.search_attributes = search_attributes
        self.clock = clock
        self._recent: dict[str, OrderedDict[str, tuple[float, DeviceRef]]] = {}
        self._nodes: dict[PoolRef, str] = {}  # where a pool's failed devices were last seen
        self._storming: set[str] = set()  # drivers in a storm now
        self._pools: dict[PoolRef, _Pool] = {}
        self.fences_told = 0  # round trips to pool fences (starts and signals)

    async def before(self, event: DeviceHealthEvent, rule: StormFence, *, dry_run: bool = False) -> None:
        """Count ``event``; in a storm, fence its pool (and pools counted before) before it is delivered.
        ``dry_run``: the driver's incidents change nothing, and neither does this.

        Raises when Temporal cannot be reached, like the delivery itself: the caller retries."""
        if dry_run or not rule.enabled or event.health is not Health.UNHEALTHY:
            return
        now = self.clock()
        recent = self._recent.setdefault(event.device.driver, OrderedDict())
        recent.pop(event.device.resource_id, None)
        recent[event.device.resource_id] = (now, event.device)
        if event.node:
            self._nodes[PoolRef.of(event.device)] = event.node
        while recent and next(iter(recent.values()))[0] < now - rule.window_s:
            recent.popitem(last=False)
        if len(recent) < rule.devices:
            self._storming.discard(event.device.driver)
            return
        why = (f"storm: {len(recent)} devices of {event.device.driver} reported Unhealthy within "
               f"{rule.window_s:g}s (storm_fence.devices {rule.devices})")
        # The pools counted before were fenced when the storm began: from then on, only this device's.
        began = event.device.driver not in self._storming
        candidates = [device for _, device in recent.values()] if began else [event.device]
        pools: dict[PoolRef, list[DeviceRef]] = {}
        for device in candidates:
            if self._needs_telling(device, now, rule):
                pools.setdefault(PoolRef.of(device), []).append(device)
        await asyncio.gather(*(self._tell(pool, devices, rule, why) for pool, devices in pools.items()))
        self._storming.add(event.device.driver)

    def storming(self, driver: str) -> bool:
        """Whether ``driver`` is in a storm now (as of the last event counted)."""
        return driver in self._storming

    def _needs_telling(self, device: DeviceRef, now: float, rule: StormFence) -> bool:
        pool = self._pools.get(PoolRef.of(device))
        if pool is None:
            return True
        told = pool.told.get(device.resource_id)
        return told is None or told < now - rule.window_s

    async def _tell(self, pool: PoolRef, devices: list[DeviceRef], rule: StormFence, why: str) -> None:
        state = self._pools.setdefault(pool, _Pool())
        for device in devices:
            state.waiting.setdefault(device.resource_id, device)
        async with state.lock:
            now = self.clock()
            batch = [d for d in state.waiting.values()
                     if state.told.get(d.resource_id, float("-inf")) < now - rule.window_s]
            if not batch:
                return  # an earlier round trip carried them
            await self._signal_with_start(pool, batch, rule, why)
            for device in batch:
                state.told[device.resource_id] = now
                state.waiting.pop(device.resource_id, None)
            self._forget_old(state, now, rule)

    @staticmethod
    def _forget_old(state: _Pool, now: float, rule: StormFence) -> None:
        for key in [k for k, at in state.told.items() if at < now - rule.window_s]:
            del state.told[key]

    async def _signal_with_start(self, pool: PoolRef, devices: list[DeviceRef], rule: StormFence, why: str) -> None:
        report = PoolFenceReport(devices=devices, observed_at=dt.datetime.now(dt.UTC))
        await self.client.start_workflow(
            names.POOL_FENCE,
            PoolFenceInput(pool=pool, policy=rule, why=why, search_attributes=self.search_attributes),
            id=pool.workflow_id, task_queue=self.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal=names.DEVICES_FAILED, start_signal_args=[report],
            priority=URGENT,
            search_attributes=search.for_pool(pool.driver, self._nodes.get(pool)) if self.search_attributes else None,
            static_summary=f"storm fence: pool {pool.pool} of {pool.driver}"[:200],
        )
        self.fences_told += 1
