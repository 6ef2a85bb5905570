"""Delivering observations to incidents: deduplicated, durable, one workflow per device.

Every source (pod status, slice taints, events, HTTP, the NVML agent through HTTP) hands
its observations to one ``Deliverer``. A device's observation goes to the workflow
``device/<driver>/<pool>/<device>`` by signal-with-start, so the Temporal server, not this
process, decides whether an incident is already open: restarts and replicas never open a
second. A pod's configuration problem goes to ``config/<ns>/<pod>/<uid>``, opened at most
once per pod. A device plugin's device goes to its node's incident, ``node/<node>``.
``deliver`` returns only after the server has accepted the signal or start,
which is what lets the HTTP front answer 202.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable, Iterable
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain import search
from podmedic.domain.classify import names_the_failure
from podmedic.domain.models import (
    ConfigProblem,
    DeviceHealthEvent,
    Health,
    IncidentInput,
    PluginDevice,
    UnresolvedDevice,
)
from podmedic.domain.node import NodeWatchInput
from podmedic.domain.policy_file import PolicySet
from podmedic.domain.policy_ref import POLICY_MEMO, pack, ref_of
from podmedic.ingest.dedup import RecentStates
from podmedic.ingest.handled import closed_run_that_saw
from podmedic.ingest.storm_fence import StormFences
from podmedic.ingest.telemetry import DeliverySpan, IncidentOpeners
from podmedic.ingest.types import Observation
from workflows import describe
from workflows.config_incident import ConfigIncidentWorkflow
from workflows.incident import DeviceIncidentWorkflow
from workflows.node_incident import NodeIncidentWorkflow
from workflows.unresolved_device import UnresolvedDeviceWorkflow

log = logging.getLogger("podmedic.ingest.delivery")


class Delivered(BaseModel):
    """What happened to one observation."""

    event_id: str
    incident_id: str | None
    deduplicated: bool = False
    note: str = ""
    run_id: str | None = None


async def _tell_open(client: Client, workflow_id: str, signal: Any, arg: BaseModel) -> str | None:
    """Signal ``workflow_id`` if it is open; its run id, or ``None`` when there is none (good news never
    opens an incident)."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        await handle.signal(signal, arg)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return handle.result_run_id


async def deliver_event(
    client: Client,
    event: DeviceHealthEvent,
    policies: PolicySet,
    *,
    task_queue: str,
    search_attributes: bool = True,
) -> str | None:
    """Deliver one event to its device's incident; returns the run id, or ``None`` when a
    Healthy event finds no open incident (nothing to do).

    Unhealthy and Unknown events use signal-with-start: an open incident receives the
    signal, otherwise a new run opens with the driver's policy as in force now. Healthy
    events only signal an open incident: good news never opens one.
    """
    device = event.device
    if event.health is Health.HEALTHY:
        return await _tell_open(client, device.workflow_id, DeviceIncidentWorkflow.health_event, event)
    policy = policies.for_driver(device.driver)
    ref = ref_of(policy)
    handle = await client.start_workflow(
        DeviceIncidentWorkflow.run,
        IncidentInput(device=device, policy_ref=ref, search_attributes=search_attributes),
        id=device.workflow_id,
        task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal="health_event",
        start_signal_args=[event],
        search_attributes=search.initial(device.driver, device.resource_id, event.node)
        if search_attributes else None,
        memo={POLICY_MEMO: pack(policy)},  # the content the input names by digest (podmedic/domain/policy_ref.py)
        static_summary=describe.static_summary(event), static_details=describe.static_details(event, policy, ref),
    )
    return handle.result_run_id


async def deliver_plugin_device(client: Client, item: PluginDevice, policies: PolicySet, *, task_queue: str,
                                search_attributes: bool = True) -> str | None:
    """Deliver a device plugin's device to its node's incident; the run id, or ``None`` when a Healthy
    report finds no open node incident.

    Not Healthy: signal-with-start ``node/<node>`` (the node incident quarantines the node: no
    DeviceTaintRule can select the device), with the policy of the resource's name (``nvidia.com/gpu``),
    else the default. Healthy: only tells an open node incident.
    """
    if item.health is Health.HEALTHY:
        return await _tell_open(client, item.workflow_id, NodeIncidentWorkflow.plugin_device_healthy, item)
    watch = NodeWatchInput.under(item.node, item.resource, policies.for_driver(item.resource),
                                 search_attributes=search_attributes)
    handle = await client.start_workflow(
        NodeIncidentWorkflow.run, watch, id=item.workflow_id, task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal="plugin_device_failed", start_signal_args=[item],
        search_attributes=search.for_node(item.resource, item.node) if search_attributes else None,
        static_summary=f"node {item.node}: device-plugin device {item.name} {item.health.value}"[:200],
    )
    return handle.result_run_id


async def deliver_pod_report(client: Client, item: ConfigProblem | UnresolvedDevice, *, task_queue: str,
                             search_attributes: bool = True) -> bool:
    """Open a report on a pod (a configuration problem, or a device podmedic cannot resolve) unless
    one ever existed for it; True when opened now.

    A pod instance gets one report per problem, ever (REJECT_DUPLICATE): the kubelet retrying
    prepare, or reporting the same health again, cannot loop.
    """
    pod = f"{item.pod.namespace}/{item.pod.name}"
    if isinstance(item, UnresolvedDevice):
        run: Any = UnresolvedDeviceWorkflow.run
        attributes = search.for_unresolved_device(item)
        summary, details = (f"{pod}: {item.resource_id} {item.health.value}, device unknown",
                            describe.unresolved_details(item))
    else:
        run = ConfigIncidentWorkflow.run
        attributes = search.for_config_problem(item)
        summary, details = f"{pod}: bad configuration, {item.message}", describe.config_details(item)
    try:
        await client.start_workflow(
            run, item, id=item.workflow_id, task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=attributes if search_attributes else None,
            static_summary=summary[:200], static_details=details,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


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

    @property
    def in_flight(self) -> int:
        """Round trips to Temporal under way now: observations in hand, not yet delivered."""
        return len(self._in_flight)

    async def deliver(self, item: Observation, *, listed: bool = False) -> Delivered:
        """Deliver one observation; raises when Temporal cannot be reached (retry it).

        ``listed``: a cluster source listed it (``podmedic.ingest.types.Emit``); a failure the device's
        last, closed incident already saw is then not opened again (``podmedic/ingest/handled.py``).
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
        # In a storm the device's pool is fenced first (podmedic/ingest/storm_fence.py).
        policy = self.policies.for_driver(item.device.driver)
        await self.storm.before(item, policy.detection.storm_fence, dry_run=policy.dry_run)
        run_id = await deliver_event(self.client, item, self.policies, task_queue=self.task_queue,
                                     search_attributes=self.search_attributes)
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
