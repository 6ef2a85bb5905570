"""Telling the fleet guard of a storm's failed devices as their events arrive.

The guard counts a device toward a storm when the device's incident asks it for a permit. In a
storm that ask comes seconds after the event: a worker reaches the first tasks of a thousand new
incidents, and their asks, one after another. So while the ingest sees a storm
(``podmedic/ingest/storm_fence.py``), each failed device that counts is also sent to the guard
(signal ``sighted``, with signal-with-start), so the guard trips at the events' pace. What counts
is what the incident's own ask would count: an actionable failure of the device, named by the
report, not caused by the workload, under an enabled guard and storm rule, outside dry run.

The delivery does not wait for the guard: sightings go in the background, one round trip at a
time, the devices that arrive while one is under way riding the next (waiting on the guard made
the ingest deliver a 1,000-device storm's events in 19.8 s instead of 12.0 s:
``python -m benchmarks storm-guard``). A round trip that fails is retried with backoff, its devices
kept; and the incident's own ask counts each device in any case, so what a failure costs is the
head start, never the count.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client

from activities.fleet_guard import GUARD_WORKFLOW, start_guard
from podmedic.domain.classify import classify, names_the_failure
from podmedic.domain.fleet_guard.messages import GuardInput, Sighting, Sightings
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.models import DeviceHealthEvent, Health
from podmedic.domain.policy import DriverPolicy

log = logging.getLogger("podmedic.ingest.guard_sightings")

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0


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
    """Sends a storm's failed devices to the guard in the background, batched, one round trip at a time."""

    def __init__(self, client: Client, task_queue: str, *, search_attributes: bool = True) -> None:
        self.client = client
        self.task_queue = task_queue
        self.search_attributes = search_attributes
        self._waiting: dict[str, Sighting] = {}
        self._policy: GuardPolicy | None = None
        self._sender: asyncio.Task[None] | None = None
        self.told = 0  # round trips to the guard
        self.failed = 0  # round trips that failed (and were retried)

    def tell(self, event: DeviceHealthEvent, policy: DriverPolicy) -> bool:
        """Queue ``event``'s device for the guard if it counts (``counts_toward_storm``); True when queued."""
        if not counts_toward_storm(event, policy):
            return False
        incident = event.device.workflow_id
        self._waiting.setdefault(incident, Sighting(incident_id=incident, device=event.device, node=event.node))
        self._policy = policy.guard
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())
        return True

    @property
    def waiting(self) -> int:
        """Devices queued, not yet told to the guard."""
        return len(self._waiting)

    async def _send(self) -> None:
        backoff = RETRY_FIRST_S
        while self._waiting and self._policy is not None:
            batch = list(self._waiting.values())
            try:
                await self.client.start_workflow(
                    GUARD_WORKFLOW, GuardInput(policy=self._policy, search_attributes=self.search_attributes),
                    start_signal="sighted", start_signal_args=[Sightings(sightings=batch)],
                    **start_guard(self.task_queue))
            except Exception as err:  # kept and retried: the incidents' asks count them meanwhile
                self.failed += 1
                log.warning("could not tell the fleet guard of %d failed device(s) (their incidents' asks count "
                            "them meanwhile); retrying in %gs: %s", len(batch), backoff, err)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)
                continue
            backoff = RETRY_FIRST_S
            self.told += 1
            for sighting in batch:
                self._waiting.pop(sighting.incident_id, None)
