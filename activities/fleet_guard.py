"""The fleet guard's side effects: asking and releasing (Temporal), its holders' runs, and fleet sizes
(ResourceSlices).

``ask_guard`` starts the guard if it is not running (``USE_EXISTING``), then sends the
``ask_many`` update (with the process's other asks of the moment), so the first incident of a
fresh namespace brings the guard up; asking twice for the same step is harmless (a holder is
granted again, an observation counted once per incident).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections import defaultdict

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.running_incidents import closed_among
from podmedic.domain import workflow_names as names
from podmedic.domain.fleet_guard.messages import (
    GUARD_WORKFLOW_ID,
    ClosedHolder,
    FleetSize,
    FleetSizeInput,
    GuardInput,
    HoldersInput,
    PermitAnswer,
    PermitAnswers,
    PermitRelease,
    PermitRequest,
    PermitRequests,
)
from podmedic.kube.gateway import KubeGateway
from podmedic.telemetry import set_guard_state
from podmedic.temporal.signals import guard_start, signal_if_open

BUSY_ATTEMPTS = 200
ASKS_IN_FLIGHT = 8
ASKS_PER_UPDATE = 50


class _Asks:
    """This process's asks to the guard of one task queue, sent together.

    At most ``ASKS_IN_FLIGHT`` updates are in flight at once: Temporal admits only 10 per workflow
    by default, and a burst far past that made the dev server stall (200 concurrent asks never
    finished in ``benchmarks/fleet_guard.py``). One ask per update, at the round trip a storm's load
    gives an update, counted a storm's devices too slowly: the fleet incident opened 32 s after the
    threshold (``python -m benchmarks storm-guard``). So the asks waiting for a free slot go together,
    up to ``ASKS_PER_UPDATE`` in one ``ask_many`` update, answered in order.
    """

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client, self.task_queue = client, task_queue
        self.slots = asyncio.Semaphore(ASKS_IN_FLIGHT)
        self.waiting: list[tuple[PermitRequest, asyncio.Future[PermitAnswer]]] = []
        self.sender_waits = False  # a sender waits for a slot and will take what is waiting then
        self.senders: set[asyncio.Task[None]] = set()

    async def ask(self, req: PermitRequest) -> PermitAnswer:
        answer: asyncio.Future[PermitAnswer] = asyncio.get_running_loop().create_future()
        self.waiting.append((req, answer))
        self._ensure_sender()
        return await answer

    def _ensure_sender(self) -> None:
        if self.waiting and not self.sender_waits:
            self.sender_waits = True
            task = asyncio.create_task(self._send())
            self.senders.add(task)
            task.add_done_callback(self.senders.discard)

    async def _send(self) -> None:
        async with self.slots:
            batch, self.waiting = self.waiting[:ASKS_PER_UPDATE], self.waiting[ASKS_PER_UPDATE:]
            self.sender_waits = False
            self._ensure_sender()
            batch = [(req, answer) for req, answer in batch if not answer.done()]  # its activity was cancelled
            if not batch:
                return
            try:
                answers = await _ask_many(self.client, self.task_queue, [req for req, _ in batch])
            except Exception as err:  # every asker's activity attempt fails with it, and is retried
                for _, answer in batch:
                    if not answer.done():
                        answer.set_exception(err)
                return
            for (_, answer), got in zip(batch, answers, strict=True):
                if not answer.done():
                    answer.set_result(got)


_asks: dict[tuple[int, str], _Asks] = {}


async def ask(client: Client, task_queue: str, req: PermitRequest) -> PermitAnswer:
    """Start the guard on ``task_queue`` unless one runs, then ask it, with this process's other asks
    of the moment (``_Asks``)."""
    key = (id(client), task_queue)
    if key not in _asks:
        _asks[key] = _Asks(client, task_queue)
    return await _asks[key].ask(req)


async def _ask_many(client: Client, task_queue: str, reqs: list[PermitRequest]) -> list[PermitAnswer]:
    handle = await client.start_workflow(
        names.FLEET_GUARD, GuardInput(policy=reqs[0].policy, search_attributes=reqs[0].search_attributes),
        **guard_start(task_queue))
    for attempt in range(BUSY_ATTEMPTS):
        try:
            found: PermitAnswers = await handle.execute_update(names.ASK_MANY, PermitRequests(requests=reqs),
                                                               result_type=PermitAnswers)
            return found.answers
        except RPCError as err:
            # Temporal admits only a few updates in flight per workflow (history.maxInFlightUpdates,
            # 10 by default), and aborts those not yet accepted when the guard continues-as-new:
            # wait our turn and ask the new run (an ask is idempotent), not fail the activity attempt.
            busy = err.status == RPCStatusCode.RESOURCE_EXHAUSTED or "update was aborted" in err.message
            if not busy or attempt == BUSY_ATTEMPTS - 1:
                raise
            await asyncio.sleep(min(1.0, 0.02 * 2 ** attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


class GuardActivities:
    """Bound to one Temporal client and one cluster."""

    def __init__(self, client: Client, kube: KubeGateway) -> None:
        self.client = client
        self.kube = kube

    @activity.defn(name="ask_guard")
    async def ask_guard(self, req: PermitRequest) -> PermitAnswer:
        """The guard's answer to one incident's step (starting the guard when none runs)."""
        answer = await ask(self.client, activity.info().task_queue, req)
        set_guard_state("tripped" if answer.tripped else "dry_run" if req.probe else "ok",
                        devices_tainted=answer.devices_tainted, nodes_disrupted=answer.nodes_disrupted,
                        limits=(req.policy.max_devices_tainted, req.policy.max_nodes_disrupted))
        return answer

    @activity.defn(name="release_guard")
    async def release_guard(self, rel: PermitRelease) -> bool:
        """Give back an incident's permit; False when no guard runs (nothing was held)."""
        return await signal_if_open(self.client, GUARD_WORKFLOW_ID, names.RELEASE, rel)

    @activity.defn(name="closed_holders")
    async def closed_holders(self, inp: HoldersInput) -> list[ClosedHolder]:
        """The permit holders whose latest run is closed: a run terminated or reset from Temporal ran no
        cleanup, so nothing gave its permit back."""
        closed = await closed_among(self.client, inp.incidents)
        return [ClosedHolder(incident_id=i, status=run.status) for i, run in closed.items()]

    @activity.defn(name="fleet_size")
    async def fleet_size(self, inp: FleetSizeInput) -> FleetSize:
        """Devices per driver and per pool (distinct names: a pool may span several slices)."""
        selector = f"spec.driver={inp.driver}" if inp.driver else ""
        slices = await self.kube.aio.list_slices(selector)
        pools: dict[str, set[str]] = defaultdict(set)
        for rslice in slices:
            spec = rslice.get("spec") or {}
            driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name")
            if not driver or not pool:
                continue
            pools[f"{driver}/{pool}"].update(d.get("name", "") for d in spec.get("devices") or [])
        drivers: dict[str, int] = defaultdict(int)
        for key, devices in pools.items():
            drivers[key.split("/", 1)[0]] += len(devices)
        return FleetSize(drivers=dict(drivers), pools={k: len(v) for k, v in pools.items()},
                         read_at=dt.datetime.now(dt.UTC))
