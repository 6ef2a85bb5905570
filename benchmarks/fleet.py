"""Driving a fleet of incidents on the simulator: training jobs, faults, events, and what happened.

The event is delivered the way the ingest delivers it (``workers.ingest.delivery.Deliverer``,
signal-with-start), right after the simulator was told the device failed, so "event" means
the moment podmedic is told; detection latency is ``python -m benchmarks detection``'s subject.
Latencies are read after the run from each incident's timeline (workflow time of the task
that saw the step done), so measuring does not load the server being measured; the taint's
time is read from the history instead (``fence_time``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError

from benchmarks.bare import Shape
from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health
from podmedic.domain.policy_file import PolicySet
from podmedic.incidents.history import local_activity_marker
from workers.ingest.dedup import RecentStates
from workers.ingest.delivery import Deliverer

DRIVER = "gpu.nvidia.com"
TAINT = "taint_device"
COVERED = "no DeviceTaintRule: covered by node incident "  # workflows/device/node_takes_over.py's timeline line


@dataclass
class Fault:
    """What fails: an XID, whether a container restart clears it, and whether the container dies."""

    # A hardware fault the XID table leaves transient (not listed), cured by an in-place restart: the whole
    # pipeline, node correlation and the repeat-offender check included (a fault the workload caused,
    # such as XID 31, skips those: docs/detection.md, Blame).
    code: int = 94
    message: str = "XID 94: contained ECC error (benchmark)"
    clears_on_restart: bool = True
    crash: bool = False


@dataclass
class Timing:
    """One incident, seen from outside: when the event left, and the steps' workflow times."""

    resource_id: str
    sent: float
    tainted: float | None = None
    recovered: float | None = None
    closed: float | None = None
    outcome: str = ""
    explanation: str = ""  # the outcome's explanation (the record's last word on why)
    covered_by: str = ""  # the node incident that quarantined the device's node instead of a rule of its own
    pool_fenced: bool = False  # its pool's storm fence came before a rule of its own (benchmarks/storm.py)

    def ms(self, at: float | None) -> float | None:
        """Milliseconds from the event to ``at``."""
        return None if at is None else (at - self.sent) * 1000


@dataclass
class Sim:
    """The simulator's own HTTP API (``/sim/v1``)."""

    url: str
    session: aiohttp.ClientSession = field(init=False)

    async def __aenter__(self) -> Sim:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=32))
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.session.close()

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        async with self.session.post(f"{self.url}/sim/v1/{path}", json=body) as answer:
            if answer.status >= 400:
                raise RuntimeError(f"simulator {path}: {answer.status} {await answer.text()}")
            return await answer.json()

    async def state(self) -> dict[str, Any]:
        async with self.session.get(f"{self.url}/sim/v1/state") as answer:
            found: dict[str, Any] = await answer.json()
            return found

    async def start_jobs(self, names: list[str], timeout_s: float = 300, nodes: Mapping[str, str] | None = None,
                         **job: Any) -> dict[str, dict[str, Any]]:
        """Create one single-GPU training Job per name; return each Job's Ready pod, by Job name.

        ``nodes`` pins a Job's pod to a node (by Job name); the others go where the simulated
        scheduler puts them (image locality packs them onto the nodes that already run one).
        """
        gate = asyncio.Semaphore(16)
        pinned = nodes or {}

        async def one(name: str) -> None:
            node = {"node_name": pinned[name]} if name in pinned else {}
            async with gate:
                await self.post("workloads/training", {"name": name, **job, **node})

        await asyncio.gather(*(one(n) for n in names))
        return await self.ready_pods(names, timeout_s)

    async def ready_pods(self, names: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
        """Each named Job's Ready pod, waiting until all are Ready."""
        wanted, deadline = set(names), time.monotonic() + timeout_s
        while True:
            pods = {p["job"]: p for p in (await self.state())["pods"]
                    if p.get("job") in wanted and p["ready"] and not p["deleting"]}
            if len(pods) == len(wanted):
                return pods
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(pods)}/{len(wanted)} training pods Ready after {timeout_s:g}s")
            await asyncio.sleep(1.0)

    async def fail(self, resource_id: str, fault: Fault) -> None:
        driver, pool, device = resource_id.split("/")
        await self.post("faults/device", {"driver": driver, "pool": pool, "device": device, "health": "Unhealthy",
                                          "reason": "XidError", "code": fault.code, "message": fault.message,
                                          "crash": fault.crash, "clears_on_restart": fault.clears_on_restart})


def deliverer(client: Client, policies: PolicySet, task_queue: str) -> Deliverer:
    """The ingest's deliverer (signal-with-start), with its dedup memory."""
    return Deliverer(client, policies, task_queue, dedup=RecentStates(300.0, 100_000))


def health_event(resource_id: str, node: str, fault: Fault) -> DeviceHealthEvent:
    """The event a detector would send for ``fault`` on the device."""
    driver, pool, device = resource_id.split("/")
    return DeviceHealthEvent(device=DeviceRef(driver=driver, pool=pool, device=device), health=Health.UNHEALTHY,
                             node=node, reason="XidError", code=fault.code, message=fault.message, source="bench",
                             observed_at=dt.datetime.now(dt.UTC), event_id=f"bench-{uuid.uuid4().hex}")


async def fire(sim: Sim, delivery: Deliverer, pods: list[dict[str, Any]], fault: Fault,
               concurrency: int = 100) -> list[Timing]:
    """Fail every pod's device and tell podmedic, ``concurrency`` at a time; returns the send times."""
    gate = asyncio.Semaphore(concurrency)

    async def one(pod: dict[str, Any]) -> Timing:
        resource_id = pod["devices"][0]
        async with gate:
            await sim.fail(resource_id, fault)
            sent = time.time()
            await delivery.deliver(health_event(resource_id, pod["node"], fault))
        return Timing(resource_id=resource_id, sent=sent)

    return list(await asyncio.gather(*(one(p) for p in pods)))


async def wait_closed(client: Client, timeout_s: float) -> int:
    """Wait until no DeviceIncident runs; returns how many still ran at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        running = (await client.count_workflows('WorkflowType = "DeviceIncident" AND ExecutionStatus = "Running"')
                   ).count
        if running == 0 or time.monotonic() > deadline:
            return running
        await asyncio.sleep(0.5)


def read_timeline(timing: Timing, outcome: IncidentOutcome) -> Timing:
    """Fill ``timing`` from the incident's timeline: taint created, pod verified recovered, closed."""
    for entry in outcome.timeline:
        at = entry.at.timestamp()
        if timing.tainted is None and entry.step == "taint" and entry.message.startswith("DeviceTaintRule"):
            timing.tainted = at
        if timing.recovered is None and entry.step == "recover" and ": verified;" in entry.message:
            timing.recovered = at
        if entry.step == "taint" and entry.message.startswith(COVERED):
            timing.covered_by = entry.message.removeprefix(COVERED).split(" ")[0]
    timing.closed = outcome.timeline[-1].at.timestamp() if outcome.timeline else None
    timing.outcome = outcome.outcome.value
    timing.explanation = outcome.explanation
    return timing


def local_activity_type(event: Any) -> str | None:
    """The activity type of a local activity's marker (``None`` for any other event)."""
    data = local_activity_marker(event)
    return None if data is None else str(data.get("activity_type"))


def fence_time(history: WorkflowHistory, activity: str = TAINT) -> float | None:
    """When the server recorded the incident's first taint done (a pool fence's: ``fence_pool``): the
    completion of the taint activity, or the workflow task that carried the local activity's marker. Either
    is after the DeviceTaintRule was created: an upper bound, like the timeline's. (The
    timeline's own time for a local activity is the time its workflow task started, before the
    rule existed, so it is not used.)"""
    scheduled: dict[int, str] = {}
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            scheduled[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        done = (e.HasField("activity_task_completed_event_attributes")
                and scheduled.get(e.activity_task_completed_event_attributes.scheduled_event_id) == activity)
        if done or local_activity_type(e) == activity:
            return e.event_time.ToDatetime(tzinfo=dt.UTC).timestamp()
    return None


def activities_in(history: WorkflowHistory) -> int:
    """Activities and local activities a history ran: what the bare baseline runs as activities."""
    return sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
               or local_activity_type(e) is not None)


async def collect(client: Client, timings: list[Timing], timeout_s: float = 600) -> list[Timing]:
    """Read every incident's outcome into its timing, waiting until ``timeout_s`` from now, for all
    of them together: the visibility count ``wait_closed`` reads lags, so an incident may still be
    closing. An incident still running then counts as unfinished, with its fence time (from its
    history) all the same: a storm too large to recover in time still says when each device was
    fenced, and a run never waits ``timeout_s`` per unfinished incident."""
    gate = asyncio.Semaphore(16)
    deadline = time.monotonic() + timeout_s

    async def one(timing: Timing) -> Timing:
        async with gate:
            handle = client.get_workflow_handle(f"device/{timing.resource_id}", result_type=IncidentOutcome)
            try:
                read_timeline(timing, await asyncio.wait_for(handle.result(), max(0.1, deadline - time.monotonic())))
            except Exception as err:  # still running or failed: reported as such, not as a recovery
                timing.outcome = f"unfinished: {type(err).__name__}"
                with contextlib.suppress(RPCError):  # no history at all: neither fenced nor recovered
                    timing.tainted = fence_time(await handle.fetch_history())
                return timing
            if timing.tainted is not None:
                timing.tainted = fence_time(await handle.fetch_history()) or timing.tainted
            return timing

    return list(await asyncio.gather(*(one(t) for t in timings)))


def shape_of(history: WorkflowHistory) -> Shape:
    """The activities (``activities_in``) and timers a history ran: the bare baseline runs as many."""
    timers = sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED)
    return Shape(activities=activities_in(history), timers=timers)


async def incident_shape(client: Client, resource_id: str) -> Shape:
    """What one incident ran (its latest run's history, once it closed): ``shape_of``."""
    await client.get_workflow_handle(f"device/{resource_id}").result()
    return shape_of(await client.get_workflow_handle(f"device/{resource_id}").fetch_history())
