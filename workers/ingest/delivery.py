"""Delivering observations to incidents: deduplicated, durable, one workflow per device.

Every source (pod status, slice taints, events, HTTP, the NVML agent through HTTP) hands
its observations to one ``Deliverer``. It drops what adds nothing to what it last told an
incident, fences a storm's pools first (``workers/ingest/storm_fence.py``) and tells the fleet
guard of a storm's devices (``workers/ingest/guard_sightings.py``), and hands the rest
to the start of its kind (``workers/ingest/starts.py``): a device's observation to
``device/<driver>/<pool>/<device>``, a device plugin's to ``node/<node>``, a pod's configuration
problem to ``config/<ns>/<pod>/<uid>``, a workload that stopped stepping to
``workload/<ns>/<kind>/<name>``. ``deliver`` returns only after the server has accepted
the signal or start, which is what lets the HTTP front answer 202.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable, Iterable

from pydantic import BaseModel
from temporalio.client import Client

from podmedic.domain.classify import names_the_failure
from podmedic.domain.maintenance import MaintenanceNotice
from podmedic.domain.models import (
    ConfigProblem,
    DeviceHealthEvent,
    Health,
    PluginDevice,
    UnresolvedDevice,
)
from podmedic.domain.policy_file import PolicySet
from podmedic.domain.stall import WorkloadStall
from workers.ingest.dedup import RecentStates
from workers.ingest.guard_sightings import GuardSightings
from workers.ingest.handled import closed_run_that_saw
from workers.ingest.starts import (
    deliver_event,
    deliver_maintenance,
    deliver_plugin_device,
    deliver_pod_report,
    deliver_stall,
)
from workers.ingest.storm_fence import StormFences
from workers.ingest.telemetry import DeliverySpan, IncidentOpeners
from workers.ingest.types import Observation

log = logging.getLogger("podmedic.ingest.delivery")


class Delivered(BaseModel):
    """What happened to one observation."""

    event_id: str
    incident_id: str | None
    deduplicated: bool = False
    note: str = ""
    run_id: str | None = None


class Deliverer:
    """Delivers observations with dedup in front of Temporal.

    A repeat of the state last delivered for a device within ``dedup`` 's TTL is answered
    from memory; concurrent identical observations share one round trip. A failed round
    trip forgets nothing it had not remembered, so the caller can retry.
    """

    def __init__(self, client: Client, policies: PolicySet, task_queue: str, *,
                 dedup: RecentStates | None = None, search_attributes: bool = True) -> None:
        self.client = client
        self.policies = policies
        self.task_queue = task_queue
        self.search_attributes = search_attributes
        self.recent = dedup if dedup is not None else RecentStates()
        self._in_flight: dict[tuple[str, Hashable], asyncio.Future[Delivered]] = {}
        self._telling: dict[str, asyncio.Future[Delivered]] = {}  # device -> its telling report on the way
        self.delivered = 0
        self.deduplicated = 0
        self.openers = IncidentOpeners()
        self.storm = StormFences(client, task_queue, search_attributes=search_attributes)
        self.sightings = GuardSightings(client, task_queue, search_attributes=search_attributes)

    @property
    def in_flight(self) -> int:
        """Round trips to Temporal under way now: observations in hand, not yet delivered."""
        return len(self._in_flight)

    async def deliver(self, item: Observation, *, listed: bool = False) -> Delivered:
        """Deliver one observation; raises when Temporal cannot be reached (retry it).

        ``listed``: a cluster source listed it (``workers.ingest.types.Emit``); a failure the device's
        last, closed incident already saw is then not opened again (``workers/ingest/handled.py``).
        """
        with DeliverySpan(item, self.openers) as span:
            done = await self._deliver(item, listed)
            span.done(done.incident_id, done.run_id, done.deduplicated)
            return done

    async def _deliver(self, item: Observation, listed: bool = False) -> Delivered:
        key, state = self._key(item)
        told = self._told(item)
        if told is None and (telling := self._telling.get(key)) is not None:
            # A batch is delivered concurrently (the agent posts an XID with its ECC reading): judge a bare
            # report once the telling one on its way has been remembered.
            with contextlib.suppress(Exception):
                await asyncio.shield(telling)
        if self.recent.seen(key, state) or self._adds_nothing(item, key, told):
            self.deduplicated += 1
            return Delivered(event_id=item.event_id, incident_id=key, deduplicated=True,
                             note="same state already delivered")
        flight = (key, state)
        shared = self._in_flight.get(flight)
        if shared is not None:
            self.deduplicated += 1
            done = await asyncio.shield(shared)
            return done.model_copy(update={"event_id": item.event_id, "deduplicated": True})
        future: asyncio.Future[Delivered] = asyncio.get_running_loop().create_future()
        self._in_flight[flight] = future
        if told is not None:
            self._telling[key] = future
        try:
            handled = await closed_run_that_saw(self.client, item, self._key) if listed else None
            result = (Delivered(event_id=item.event_id, incident_id=key, deduplicated=True, run_id=handled,
                                note=f"listed again; run {handled} saw this state and closed: not reopened")
                      if handled else await self._round_trip(item))
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here so an unshared failure is not logged as lost
            raise
        finally:
            del self._in_flight[flight]
            if self._telling.get(key) is future:
                del self._telling[key]
        self.recent.remember(key, state)
        if told is not None:
            self.recent.remember(f"{key}#told", told)
        if result.deduplicated:
            self.deduplicated += 1
        else:
            self.delivered += 1
        future.set_result(result)
        return result

    async def deliver_all(self, items: Iterable[Observation]) -> list[Delivered]:
        """Deliver several observations concurrently; fails if any fails (all are retryable)."""
        return list(await asyncio.gather(*(self.deliver(item) for item in items)))

    async def _round_trip(self, item: Observation) -> Delivered:
        if isinstance(item, MaintenanceNotice):
            run_id, note = await deliver_maintenance(self.client, item, self.policies, task_queue=self.task_queue,
                                                     search_attributes=self.search_attributes)
            return Delivered(event_id=item.event_id, incident_id=item.workflow_id if run_id else None, run_id=run_id,
                             note=note)
        if isinstance(item, WorkloadStall):
            run_id = await deliver_stall(self.client, item, self.policies, task_queue=self.task_queue,
                                         search_attributes=self.search_attributes)
            return Delivered(event_id=item.event_id, incident_id=item.workflow_id, run_id=run_id)
        if isinstance(item, (ConfigProblem, UnresolvedDevice)):
            opened = await deliver_pod_report(self.client, item, task_queue=self.task_queue,
                                              search_attributes=self.search_attributes)
            return Delivered(event_id=item.event_id, incident_id=item.workflow_id,
                             note="reported" if opened else "already reported for this pod")
        if isinstance(item, PluginDevice):
            run_id = await deliver_plugin_device(self.client, item, self.policies, task_queue=self.task_queue,
                                                 search_attributes=self.search_attributes)
            note = "healthy; no open node incident" if run_id is None else ""
            return Delivered(event_id=item.event_id, incident_id=item.workflow_id if run_id else None,
                             run_id=run_id, note=note)
        # In a storm the device's pool is fenced first (workers/ingest/storm_fence.py), and the fleet guard
        # counts the device now, not when its incident asks (workers/ingest/guard_sightings.py).
        policy = self.policies.for_driver(item.device.driver)
        await self.storm.before(item, policy.detection.storm_fence, dry_run=policy.dry_run)
        storm = self.storm.storming(item.device.driver)
        delivering = deliver_event(self.client, item, self.policies, task_queue=self.task_queue,
                                   search_attributes=self.search_attributes, storm=storm)
        if storm:
            _, run_id = await asyncio.gather(self.sightings.tell(item, policy), delivering)
        else:
            run_id = await delivering
        if run_id is None:
            return Delivered(event_id=item.event_id, incident_id=None, note="healthy; no open incident")
        return Delivered(event_id=item.event_id, incident_id=item.device.workflow_id, run_id=run_id)

    def _told(self, item: Observation) -> str | None:
        """The health a device report that says what failed gives (an XID, readings, a slice taint's
        reason), else ``None``."""
        if not isinstance(item, DeviceHealthEvent) or item.health is Health.HEALTHY:
            return None
        return item.health.value if names_the_failure(item, self.policies.for_driver(item.device.driver)) else None

    def _adds_nothing(self, item: Observation, key: str, told: str | None) -> bool:
        """A report that does not say what failed (pod status without the driver's message, the agent's
        later ECC reading) within the driver's ``corroborate_s`` of a delivered report of the same health
        that did (the node agent's XID often comes first): it would only reopen an incident that already
        closed on the telling report, or tell a running one nothing."""
        if told is not None or not isinstance(item, DeviceHealthEvent) or item.health is Health.HEALTHY:
            return False
        window = self.policies.for_driver(item.device.driver).detection.corroborate_s
        return self.recent.last(f"{key}#told", within_s=window) == item.health.value

    @staticmethod
    def _key(item: Observation) -> tuple[str, Hashable]:
        if isinstance(item, MaintenanceNotice):
            return item.workflow_id, item.event_id
        if isinstance(item, WorkloadStall):
            return item.workflow_id, item.steps
        if isinstance(item, UnresolvedDevice):
            return item.workflow_id, (item.health, item.message)
        if isinstance(item, ConfigProblem):
            return item.workflow_id, (item.reason, item.message)
        if isinstance(item, PluginDevice):
            return f"{item.workflow_id}/{item.name}", (item.health, item.pod.uid)
        # The pod is part of the state: a device repaired while no pod used it (the ingest never
        # saw it Healthy) and failing again under a new pod is a new incident, not a repeat. So is
        # the occurrence: an XID that happens again is news, a retried post of the same one is not.
        return item.device.workflow_id, (item.state_key, item.pod.uid if item.pod else "", item.occurrence)
