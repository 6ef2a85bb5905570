"""What every fault scenario uses: the stack started as separate processes, and ways to act on it.

The stack is ``podmedic up``'s (``workers.stack.up.Stack``) with supervision off, so a scenario kills
and restarts children itself, on the same ports and the same Temporal SQLite database. Every
figure a scenario reports about effects is read from outside podmedic: the simulator's request
ledger (``GET /sim/v1/ledger``) and the vendor desk's tickets; outcomes and attempt counts come
from Temporal (results and histories), never from podmedic's own logs.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from benchmarks.faults.policy import FAULT
from podmedic.domain import search
from podmedic.domain.incident import IncidentOutcome
from podmedic.incidents.history import local_activity_marker
from podmedic.temporal.connect import connect
from workers.stack.up import Stack
from workflows.device.incident import DeviceIncidentWorkflow

T = TypeVar("T")


@dataclass
class Incident:
    """One device incident a scenario opened."""

    device: str
    job: str
    pod: str
    expect: str = "resolved_by_vendor"
    outcome: IncidentOutcome | None = None
    events_sent: list[str] = field(default_factory=list)
    """CloudEvent ids the ingest answered 202 for (``ce/<source>/<id>`` in the history)."""
    failed_at: float = 0.0
    """When the suite made the device fail (epoch s): an earlier run of the same id is not this incident."""
    run_id: str | None = None

    @property
    def workflow_id(self) -> str:
        """The incident's workflow id."""
        return f"device/{self.device}"


class Harness:
    """A running stack and the handles a scenario needs."""

    def __init__(self, stack: Stack, client: Client, session: aiohttp.ClientSession) -> None:
        self.stack = stack
        self.client = client
        self.session = session
        ep = stack.endpoints
        self.sim_url = str(ep["sim_url"])
        self.ingest_url = str(ep["ingest_url"])
        self.ticket_url = str(ep["ticket_url"])
        self.token = Path(str(ep["ingest_token_file"])).read_text().strip()

    @classmethod
    async def open(cls, stack: Stack) -> Harness:
        """Connect to a started stack."""
        client = await connect(str(stack.endpoints["temporal_address"]))
        return cls(stack, client, aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)))

    async def close(self) -> None:
        """Release the HTTP session."""
        await self.session.close()

    # -- the simulator and the vendor desk ---------------------------------------------------
    async def http(self, method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        """JSON in, JSON out; raises on 4xx/5xx."""
        async with self.session.request(method, url, json=body, headers=headers) as resp:
            text = await resp.text()
            if resp.status >= 400:
                raise RuntimeError(f"{method} {url}: {resp.status} {text[:300]}")
            return json.loads(text) if text else None

    async def sim_state(self) -> dict[str, Any]:
        """``GET /sim/v1/state``."""
        state: dict[str, Any] = await self.http("GET", f"{self.sim_url}/sim/v1/state")
        return state

    async def pod_annotations(self, incident: Incident) -> dict[str, str]:
        """The incident's pod's annotations, read from the API server as a test client (no ledger entry)."""
        pod = await self.http("GET", f"{self.sim_url}/api/v1/namespaces/default/pods/{incident.pod}")
        return dict((pod.get("metadata") or {}).get("annotations") or {})

    async def api_fault(self, **rule: Any) -> None:
        """Inject an API fault rule into the simulator."""
        await self.http("POST", f"{self.sim_url}/sim/v1/faults/api", rule)

    async def clear_api_faults(self) -> None:
        """Drop every API fault rule."""
        await self.http("DELETE", f"{self.sim_url}/sim/v1/faults/api")

    async def held_calls(self) -> int:
        """Requests the simulator's ``hold`` rules keep in flight now."""
        return int((await self.http("GET", f"{self.sim_url}/sim/v1/faults/api"))["held"])

    async def hold_tickets(self, hold: bool) -> None:
        """Make the vendor desk hold its answers to ticket creates (the ticket filed), or release them."""
        await self.http("POST", self.ticket_url.rsplit("/tickets", 1)[0] + "/desk/hold", {"hold": hold})

    async def held_tickets(self) -> int:
        """Ticket create answers the desk holds now."""
        return int((await self.http("GET", self.ticket_url.rsplit("/tickets", 1)[0] + "/desk/hold"))["held"])

    async def ledger(self) -> list[dict[str, Any]]:
        """The simulator's count of podmedic's requests and their answers."""
        found: list[dict[str, Any]] = (await self.http("GET", f"{self.sim_url}/sim/v1/ledger"))["entries"]
        return found

    async def reset_ledger(self) -> None:
        """Forget the requests counted so far (each scenario counts its own)."""
        await self.http("DELETE", f"{self.sim_url}/sim/v1/ledger")

    async def tickets(self) -> list[dict[str, Any]]:
        """Every ticket the vendor desk holds."""
        found: list[dict[str, Any]] = await self.http("GET", self.ticket_url)
        return found

    async def start_jobs(self, count: int, prefix: str, **job: Any) -> list[Incident]:
        """``count`` single-GPU training jobs, Ready; one future incident per job's device."""
        names = [f"{prefix}-{uuid.uuid4().hex[:5]}-{i}" for i in range(count)]
        for name in names:
            await self.http("POST", f"{self.sim_url}/sim/v1/workloads/training",
                            {"name": name, "image": f"registry.local/{prefix}:1", **job})

        async def ready() -> list[dict[str, Any]] | None:
            pods = [p for p in (await self.sim_state())["pods"] if p.get("job") in names and p.get("ready")]
            return pods if len({p["job"] for p in pods}) == count else None
        pods = await wait_for(ready, 90, f"{count} {prefix} jobs Ready")
        return [Incident(device=p["devices"][0], job=p["job"], pod=p["name"]) for p in sorted(pods, key=_job)]

    async def fail(self, incident: Incident, **fault: Any) -> None:
        """Make the incident's device Unhealthy in the simulator (the ingest's watch sees it)."""
        driver, pool, device = incident.device.split("/")
        incident.failed_at = incident.failed_at or time.time()
        await self.http("POST", f"{self.sim_url}/sim/v1/faults/device",
                        {"driver": driver, "pool": pool, "device": device, **(fault or FAULT)})

    async def send_event(self, incident: Incident, event_id: str) -> int:
        """Report the device Unhealthy over the ingest's HTTP front; the HTTP status."""
        driver, pool, device = incident.device.split("/")
        incident.failed_at = incident.failed_at or time.time()
        event = {"specversion": "1.0", "id": event_id, "source": "podmedic-bench-faults",
                 "type": "io.podmedic.device.health.v1",
                 "data": {"driver": driver, "pool": pool, "device": device, "node": pool, "health": "Unhealthy",
                          "code": FAULT["code"], "message": FAULT["message"]}}
        async with self.session.post(f"{self.ingest_url}/v1/events", data=json.dumps(event), headers={
                "Content-Type": "application/cloudevents+json", "Authorization": f"Bearer {self.token}"}) as resp:
            await resp.read()
            if resp.status == 202:
                incident.events_sent.append(f"ce/podmedic-bench-faults/{event_id}")
            return resp.status

    # -- Temporal --------------------------------------------------------------------------
    def handle(self, incident: Incident) -> WorkflowHandle[Any, IncidentOutcome]:
        """The incident's workflow handle (its own run once known: devices are reused by later scenarios)."""
        return self.client.get_workflow_handle_for(DeviceIncidentWorkflow.run, incident.workflow_id,
                                                   run_id=incident.run_id)

    async def describe(self, incident: Incident) -> WorkflowExecutionDescription | None:
        """The incident's run, or ``None`` while only an earlier run of the device's id exists."""
        try:
            desc = await self.handle(incident).describe()
        except RPCError:
            return None
        if incident.run_id is None:
            if desc.start_time is None or desc.start_time.timestamp() < incident.failed_at - 1.0:
                return None  # a previous incident of this device, closed before this one failed it
            incident.run_id = desc.run_id
        return desc

    async def phase(self, incident: Incident) -> str | None:
        """The incident's ``PodmedicPhase`` (from the server's visibility: no worker needed)."""
        desc = await self.describe(incident)
        if desc is None:
            return None
        if desc.status not in (None, WorkflowExecutionStatus.RUNNING):
            return "Closed"
        return desc.typed_search_attributes.get(search.PHASE)

    async def wait_phase(self, incident: Incident, phases: set[str], timeout_s: float) -> str:
        """Wait until the incident is in one of ``phases``."""
        seen: list[str | None] = []

        async def reached() -> str | None:
            now = await self.phase(incident)
            if not seen or seen[-1] != now:
                seen.append(now)
            return now if now in phases else None
        try:
            return await wait_for(reached, timeout_s, f"{incident.device} in {sorted(phases)}", interval=0.1)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; phases seen: {seen}") from None

    async def outcomes(self, incidents: list[Incident], timeout_s: float) -> None:
        """Wait for every incident's result (left ``None`` when it did not end in time)."""
        deadline = time.monotonic() + timeout_s

        async def one(incident: Incident) -> None:
            while time.monotonic() < deadline:
                if await self.describe(incident) is None:
                    await asyncio.sleep(0.5)
                    continue
                try:
                    incident.outcome = await asyncio.wait_for(self.handle(incident).result(),
                                                              max(1.0, deadline - time.monotonic()))
                    return
                except (RPCError, TimeoutError):
                    await asyncio.sleep(0.5)  # not started yet, or the server is restarting
                except Exception:  # a failed workflow is a finding, not a crash of the suite
                    return
        await asyncio.gather(*(one(i) for i in incidents))

    async def history_events(self, incident: Incident) -> list[Any]:
        """Every event of the incident's history (all runs of the id are not needed: one run)."""
        history = await self.handle(incident).fetch_history()
        return list(history.events)

    async def runs(self, incident: Incident) -> list[str]:
        """Run ids of the device's workflow started since the suite failed the device."""
        found = []
        async for run in self.client.list_workflows(f"WorkflowId = '{incident.workflow_id}'"):
            if run.start_time.timestamp() >= incident.failed_at - 1.0:
                found.append(run.run_id)
        return found

    async def signalled_ids(self, incident: Incident) -> set[str]:
        """Event ids found in the signals of any run since the failure (which reached an incident)."""
        found: set[str] = set()
        for run_id in await self.runs(incident):
            handle = self.client.get_workflow_handle(incident.workflow_id, run_id=run_id)
            async for event in handle.fetch_history_events():
                if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                    continue
                for payload in event.workflow_execution_signaled_event_attributes.input.payloads:
                    found.update(i for i in incident.events_sent if i.encode() in payload.data)
        return found

    async def attempts(self, incident: Incident) -> dict[str, int]:
        """Highest attempt each activity type reached, from the history (local activities' from
        their markers)."""
        scheduled: dict[int, str] = {}
        top: dict[str, int] = {}
        for event in await self.history_events(incident):
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                attrs = event.activity_task_started_event_attributes
                name = scheduled.get(attrs.scheduled_event_id, "?")
                top[name] = max(top.get(name, 0), attrs.attempt)
            elif (local := local_activity_marker(event)) is not None:
                name = str(local.get("activity_type", "?"))
                top[name] = max(top.get(name, 0), int(local.get("attempt") or 1))
        return top


def _job(pod: dict[str, Any]) -> str:
    return str(pod["job"])


async def wait_for(check: Callable[[], Awaitable[T | None]], timeout_s: float, what: str,
                   interval: float = 0.5) -> T:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = await check()
        except (aiohttp.ClientError, RuntimeError, RPCError):
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")
        await asyncio.sleep(interval)
