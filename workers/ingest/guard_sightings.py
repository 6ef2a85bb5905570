"""Telling the fleet guard of a storm's failed devices as their events arrive.

The guard counts a device toward a storm when the device's incident asks it for a permit. In a
storm that ask comes seconds after the event: a worker reaches the first tasks of a thousand new
incidents, and their asks, one after another. So while the ingest sees a storm
(``workers/ingest/storm_fence.py``), each failed device that counts is also sent to the guard
(signal ``sighted``, with signal-with-start), so the guard trips at the events' pace. What counts
is what the incident's own ask would count: an actionable failure of the device, named by the
report, not caused by the workload, under an enabled guard and storm rule, outside dry run.

The ingest also tells the guard the policy file in force when it starts (``tell_policy``), so that the
guard keeps the warm spares the file asks for before any incident has asked it (``podmedic/domain/spares.py``).

One round trip at a time: the devices that arrive while one is under way ride the next. A
delivery returns only once its device was sent, or fails (and is retried) with the round trip;
the incident's own ask counts the device in any case, so nothing is lost when the guard cannot
be told, only the head start. Sent in the background instead (the delivery not waiting), the
sightings did not help: in ``python -m benchmarks storm-guard`` the fleet incident opened 14.9 and
17.2 s after the threshold (events delivered in 18.2 and 18.3 s), against 1.0 and 2.1 s waited
on (19.8 and 21.9 s) and 15.8 s with no sightings (15.3 s), one run each on this 2-core machine.
"""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from podmedic.domain import workflow_names as names
from podmedic.domain.classify import classify, names_the_failure
from podmedic.domain.fleet_guard.messages import GUARD_WORKFLOW_ID, GuardInput, Sighting, Sightings
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.models import DeviceHealthEvent, Health
from podmedic.domain.policy import DriverPolicy
from podmedic.temporal.signals import guard_start, signal_if_open


def counts_toward_storm(event: DeviceHealthEvent, policy: DriverPolicy) -> bool:
    """Whether the guard counts ``event``'s device toward a storm, as its incident's ask would."""
    guard = policy.guard
    if guard is None or not guard.enabled or not guard.storm.enabled or policy.dry_run:
        return False  # in dry run an incident only probes the guard, and a probe counts nothing
    if event.health is not Health.UNHEALTHY or not names_the_failure(event, policy):
        return False  # an uncoded report waits for corroboration: its incident's ask counts it
    verdict = classify(event, policy)
    return verdict.actionable and not verdict.failure_mode.blames_the_workload


class GuardSightings:
    """Sends a storm's failed devices to the guard, batched, one round trip at a time."""

    def __init__(self, client: Client, task_queue: str, *, search_attributes: bool = True) -> None:
        self.client = client
        self.task_queue = task_queue
        self.search_attributes = search_attributes
        self._lock = asyncio.Lock()
        self._waiting: dict[str, Sighting] = {}
        self.told = 0  # round trips to the guard
        self.failed = 0  # round trips that failed (the deliveries waiting on them fail, and are retried)

    @property
    def waiting(self) -> int:
        """Devices not yet told to the guard (a failed round trip's, until a delivery is retried)."""
        return len(self._waiting)

    async def tell(self, event: DeviceHealthEvent, policy: DriverPolicy) -> bool:
        """Send ``event``'s device to the guard if it counts (``counts_toward_storm``); True when sent.
        Raises when Temporal cannot be reached, like the delivery itself: the caller retries."""
        if not counts_toward_storm(event, policy):
            return False
        assert policy.guard is not None
        incident = event.device.workflow_id
        self._waiting.setdefault(incident, Sighting(incident_id=incident, device=event.device, node=event.node))
        async with self._lock:
            batch = list(self._waiting.values())
            if not batch:
                return True  # an earlier round trip carried it
            try:
                await self.client.start_workflow(
                    names.FLEET_GUARD, GuardInput(policy=policy.guard, search_attributes=self.search_attributes),
                    start_signal=names.SIGHTED, start_signal_args=[Sightings(sightings=batch)],
                    **guard_start(self.task_queue))
            except Exception:
                self.failed += 1
                raise
            self.told += 1
            for sighting in batch:
                self._waiting.pop(sighting.incident_id, None)
        return True

    async def tell_policy(self, guard: GuardPolicy | None) -> str:
        """Tell the guard the file's ``guard:`` section; what was done. A file that keeps warm spares starts the
        guard if none runs (spares are kept from the start); one that keeps none only tells a running guard
        (which may hold spares to give back). Raises when Temporal cannot be reached: the caller retries."""
        if guard is None or not guard.enabled:
            return "no fleet guard in the policy: nothing told"
        if guard.spares.per_pool > 0:
            await self.client.start_workflow(
                names.FLEET_GUARD, GuardInput(policy=guard, search_attributes=self.search_attributes),
                start_signal=names.POLICY_IN_FORCE, start_signal_args=[guard], **guard_start(self.task_queue))
            return f"fleet guard told the policy in force: it keeps {guard.spares.per_pool} warm spare(s) per pool"
        if await signal_if_open(self.client, GUARD_WORKFLOW_ID, names.POLICY_IN_FORCE, guard):
            return "fleet guard told the policy in force (no warm spares)"
        return "no fleet guard runs and the policy keeps no warm spares: nothing told"
