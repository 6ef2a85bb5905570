"""A storm's pool fence: one NoSchedule DeviceTaintRule over a pool, until its devices are fenced on their own.

The ingest starts it (signal-with-start ``pool/<driver>/<pool>``, at the highest task priority)
when a driver's devices fail faster than its ``detection.storm_fence`` allows, and tells it each
failed device of the pool it sees. Its first workflow task makes the rule (a local activity: no
task queue between the storm and the fence). It then holds the rule at least ``min_hold_s`` after
the last device it was told of, until each of those devices has a rule of its own or no running
incident, and never longer than ``max_hold_s``; then lets it go (deleted unless an operator
edited it or someone else holds it). A device told while it lets go starts the hold again.
Each look that still finds a device uncovered doubles the wait before the next, up to
``LOOK_BACKOFF`` times ``poll_s``: in a storm the server is short of time for the very
incidents the pools wait on.

NoSchedule only: no pod is evicted by a pool's rule, so it spends none of the fleet guard's
disruption budget; each device's incident decides its own device's effect.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.node import NodeActivities
    from activities.pool_fence import PoolFenceActivities
    from podmedic.domain import search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.models import DeviceRef, TimelineEntry
    from podmedic.domain.node import DeviceIncidentsInput
    from podmedic.domain.pool_fence import (
        PoolDevicesInput,
        PoolFenceInput,
        PoolFenceReport,
        PoolFenceState,
        PoolRuleInput,
    )
    from workflows.activity_options import ONE_CALL, UNTIL_DONE, URGENT

LOOK_BACKOFF = 8
"""The longest wait between two looks at a pool's devices, in ``poll_s``. In a hall-wide storm whose
incidents' workflow tasks wait long to be handed out, every pool looking at each ``poll_s`` (a rule
read and its incidents' status each time, and always finding a device whose incident has not run
yet) made most of the server's writes that ran out of time (docs/BENCHMARKS.md)."""


@workflow.defn(name=names.POOL_FENCE)
class PoolFenceWorkflow:
    """Fences one pool in a storm, and lets go once its failed devices are fenced one by one."""

    @workflow.init
    def __init__(self, inp: PoolFenceInput) -> None:
        self.inp = inp
        self.state = PoolFenceState(pool=inp.pool)
        self.devices: dict[str, DeviceRef] = {}
        self.reports = 0

    @workflow.signal(name=names.DEVICES_FAILED)
    def devices_failed(self, report: PoolFenceReport) -> None:
        """Failed devices of the pool, as the ingest saw them."""
        new = [d.resource_id for d in report.devices if d.resource_id not in self.devices]
        for device in report.devices:
            self.devices.setdefault(device.resource_id, device)
        self.reports += 1
        self.state.devices = sorted(self.devices)
        if new:
            # When the ingest sent them, beside when the fence heard (the entry's time): the gap is the
            # storm's signal lag.
            self.note("told", f"{', '.join(new)} failed (sent by the ingest at "
                              f"{report.observed_at.isoformat(timespec='seconds')})")

    @workflow.query
    def get_state(self) -> PoolFenceState:
        """The pool, its rule, the devices told and those not yet fenced on their own."""
        return self.state

    def note(self, step: str, message: str) -> None:
        """Add a line to the timeline."""
        self.state.timeline.append(TimelineEntry(at=workflow.now(), step=step, message=message))
        workflow.set_current_details(f"**{step}**: {message}")

    @workflow.run
    async def run(self, inp: PoolFenceInput) -> PoolFenceState:
        """Fence, hold, release."""
        await workflow.wait_condition(lambda: bool(self.devices))
        pool = f"pool {inp.pool.pool} of {inp.pool.driver}"
        fenced = await workflow.execute_local_activity_method(
            PoolFenceActivities.fence_pool, PoolRuleInput(pool=inp.pool, reason=inp.why),
            start_to_close_timeout=timedelta(seconds=30), retry_policy=UNTIL_DONE,
            local_retry_threshold=timedelta(seconds=1), summary=f"fence {pool}"[:200])
        if fenced.unavailable:
            self.note("fence", f"no pool fence: {fenced.unavailable}; each device's incident fences its device")
            if inp.search_attributes:
                workflow.upsert_search_attributes([search.PHASE.value_set("Closed")])
            return self.state
        self.state.rule_name = fenced.rule_name
        self.note("fence", f"DeviceTaintRule {fenced.rule_name} ({fenced.effect.value}) over {pool}: {inp.why}")
        while True:
            await self._hold(inp)
            told = self.reports
            released = await workflow.execute_activity_method(
                PoolFenceActivities.unfence_pool, PoolRuleInput(pool=inp.pool, reason=f"{pool}: fence lifted"),
                start_to_close_timeout=ONE_CALL, retry_policy=UNTIL_DONE, summary=f"unfence {pool}"[:200])
            if self.reports == told:
                break
            # A device was told while the rule was let go: fence again and hold anew.
            await workflow.execute_activity_method(
                PoolFenceActivities.fence_pool, PoolRuleInput(pool=inp.pool, reason=inp.why),
                start_to_close_timeout=ONE_CALL, retry_policy=UNTIL_DONE, priority=URGENT,
                summary=f"fence {pool}"[:200])
            self.note("fence", "a failed device was reported while the rule was let go: fenced again")
        self.state.released = released.removed
        self.note("release", f"{released.detail or 'released'}")
        if inp.search_attributes:
            workflow.upsert_search_attributes([search.PHASE.value_set("Closed")])
        return self.state

    async def _hold(self, inp: PoolFenceInput) -> None:
        policy = inp.policy
        started = workflow.now()

        def held() -> float:
            return (workflow.now() - started).total_seconds()

        while held() < policy.max_hold_s:
            told = self.reports
            # The minimum hold counts from the last device told; a new one starts it again.
            if not await self._quiet_for(told, min(policy.min_hold_s, policy.max_hold_s - held())):
                continue
            pause = policy.poll_s
            while self.reports == told and held() < policy.max_hold_s:
                self.state.uncovered = await self._uncovered()
                if not self.state.uncovered and self.reports == told:
                    self.note("hold", f"every failed device told ({len(self.devices)}) is fenced on its own or "
                                      "its incident closed")
                    return
                await workflow.sleep(timedelta(seconds=max(1.0, min(pause, policy.max_hold_s - held()))))
                pause = min(2 * pause, LOOK_BACKOFF * policy.poll_s)
        self.note("hold", f"held {held():.0f}s (max_hold_s); not fenced on their own: "
                          f"{', '.join(self.state.uncovered[:20]) or 'none known'}")

    async def _quiet_for(self, told: int, seconds: float) -> bool:
        """Whether no further device was told for ``seconds``."""
        try:
            await workflow.wait_condition(lambda: self.reports != told, timeout=timedelta(seconds=max(seconds, 0.001)))
        except TimeoutError:
            return True
        return False

    async def _uncovered(self) -> list[str]:
        """Told devices with no rule of their own whose incident still runs (or never opened yet)."""
        devices = [self.devices[k] for k in sorted(self.devices)]
        without: list[str] = await workflow.execute_activity_method(
            PoolFenceActivities.devices_without_own_rule, PoolDevicesInput(devices=devices),
            start_to_close_timeout=ONE_CALL, retry_policy=UNTIL_DONE, summary="devices without a rule of their own")
        if not without:
            return []
        statuses = await workflow.execute_activity_method(
            NodeActivities.device_incidents_status, DeviceIncidentsInput(incidents=[f"device/{r}" for r in without]),
            start_to_close_timeout=ONE_CALL, retry_policy=UNTIL_DONE, summary="their incidents")
        # An incident not found has not opened yet (its event is still on its way): not covered.
        return [s.incident_id.removeprefix("device/") for s in statuses if s.running or s.outcome == "not found"]
