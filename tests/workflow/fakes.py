"""Fake activities registered under the real activity names, to test workflow logic alone."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities.history import DeviceHistory, PreviousIncident, PreviousIncidentsInput
from podmedic.domain.incident import StepNotice, StepNoticeResult
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, PodRef
from podmedic.domain.node import (
    DeviceIncidentsInput,
    DeviceIncidentStatus,
    HoldTaintsInput,
    NodeReportInput,
    NodeReportResult,
    QuarantineInput,
    QuarantineResult,
)
from podmedic.domain.steps import (
    CheckpointInput,
    CheckpointReport,
    CheckpointStatus,
    DeviceHealthReading,
    DeviceInput,
    DiscoverInput,
    Discovery,
    PodCheckpoint,
    RecoverInput,
    RecoveryResult,
    TaintInput,
    TaintResult,
    TicketInput,
    TicketNoteInput,
    TicketResult,
    TicketStatusInput,
    UntaintInput,
    UntaintResult,
)


def incident_worker(client: Client, task_queue: str, workflows: Sequence[type],
                    activities: Sequence[Callable[..., Any]]) -> Worker:
    """A worker for ``workflows`` with fake ``activities`` registered under the real names."""
    return Worker(client, task_queue=task_queue, workflows=list(workflows), activities=list(activities))


DEVICE = DeviceRef(driver="gpu.nvidia.com", pool="node-0000", device="gpu-0")
POD = PodRef(namespace="default", name="train-abcde", uid="uid-1", node="node-0000", job="train",
             checkpoint_method="annotation")


T0 = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def event(health: Health = Health.UNHEALTHY, code: int | None = None, event_id: str = "e1",
          device: DeviceRef = DEVICE, after_s: float = 0.0) -> DeviceHealthEvent:
    """A health event as a detector would send it, ``after_s`` seconds after T0."""
    return DeviceHealthEvent(
        device=device, health=health, node=device.pool, reason="XID" if code else "test", code=code,
        source="test", observed_at=T0 + dt.timedelta(seconds=after_s), event_id=event_id,
    )


class FakeCluster:
    """Activities that act on nothing and count their calls; behaviour set per test."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.taint_error: str | None = None
        self.checkpoint_error: str | None = None
        self.discover_delay_s = 0.0
        self.notice_delay_s = 0.0
        self.notice_refused: set[str] = set()  # steps whose notice the API server refuses (non-retryable)
        self.order: list[str] = []  # discover, checkpoint, taint and each notice's end, as they happened
        self.taint_effects: list[str] = []
        self.pods: list[PodRef] = [POD]  # what discovery finds on the device
        self.tainted: set[str] = set()  # the devices that got a DeviceTaintRule
        self.restart_verifies = True
        self.health = Health.HEALTHY
        self.node_reports: list[NodeReportInput] = []
        self.ticket_state = "resolved"
        self.ticket_notes: list[str] = []  # what note_ticket added to the open ticket
        self.notices: list[StepNotice] = []
        self.previous: list[PreviousIncident] = []
        self.history_unread: str | None = None
        self.quarantines: list[QuarantineInput] = []
        self.lifts: list[QuarantineInput] = []
        self.held: dict[str, asyncio.Event] = {}  # activity name -> waits until the event is set

    def hold(self, name: str) -> asyncio.Event:
        """Make the activity ``name`` wait until the returned event is set.

        A test holds the incident inside a step this way, so that an update sent next meets
        the state the test means, however fast the worker runs on.
        """
        self.held[name] = asyncio.Event()
        return self.held[name]

    async def _pass(self, name: str) -> None:
        gate = self.held.get(name)
        if gate is not None:
            await gate.wait()

    def activities(self) -> Sequence[Callable[..., Any]]:
        """The fakes, each under the name of the real activity."""

        @activity.defn(name="discover_device")
        async def discover_device(inp: DiscoverInput) -> Discovery:
            self.calls["discover_device"] += 1
            self.order.append("discover_device")
            await asyncio.sleep(self.discover_delay_s)
            return Discovery(node=POD.node, pods=list(self.pods),
                             reading=DeviceHealthReading(health=Health.UNHEALTHY, message="XID"))

        @activity.defn(name="request_checkpoints")
        async def request_checkpoints(inp: CheckpointInput) -> CheckpointReport:
            self.calls["request_checkpoints"] += 1
            self.order.append("request_checkpoints")
            await self._pass("request_checkpoints")
            if self.checkpoint_error:
                raise ApplicationError("API unavailable", type=self.checkpoint_error)
            return CheckpointReport(results=[
                PodCheckpoint(pod=p.name, method="annotation", status=CheckpointStatus.SAVED,
                              checkpoint_id=f"ckpt-{inp.request_id}") for p in inp.pods
            ])

        @activity.defn(name="taint_device")
        async def taint_device(inp: TaintInput) -> TaintResult:
            self.calls["taint_device"] += 1
            self.order.append("taint_device")
            await self._pass("taint_device")
            self.taint_effects.append(inp.effect.value)
            self.tainted.add(inp.device.resource_id)
            if self.taint_error:
                raise ApplicationError("API unavailable", type=self.taint_error)
            return TaintResult(rule_name=inp.device.object_name, created=True, effect=inp.effect)

        @activity.defn(name="remove_taint")
        async def remove_taint(inp: UntaintInput) -> UntaintResult:
            self.calls["remove_taint"] += 1
            return UntaintResult(removed=True, detail="removed: no other incident holds it")

        @activity.defn(name="restart_in_place")
        async def restart_in_place(inp: RecoverInput) -> RecoveryResult:
            self.calls["restart_in_place"] += 1
            return RecoveryResult(verified=self.restart_verifies, action="in_place_restart", pod=inp.pod)

        @activity.defn(name="reschedule_same_node")
        async def reschedule_same_node(inp: RecoverInput) -> RecoveryResult:
            self.calls["reschedule_same_node"] += 1
            await self._pass("reschedule_same_node")
            return RecoveryResult(verified=True, action="same_node", pod=inp.pod, same_node=True)

        @activity.defn(name="reschedule_any_node")
        async def reschedule_any_node(inp: RecoverInput) -> RecoveryResult:
            self.calls["reschedule_any_node"] += 1
            return RecoveryResult(verified=True, action="any_node", pod=inp.pod, same_node=False)

        @activity.defn(name="read_device_health")
        async def read_device_health(inp: DeviceInput) -> DeviceHealthReading:
            self.calls["read_device_health"] += 1
            await self._pass("read_device_health")
            return DeviceHealthReading(health=self.health)

        @activity.defn(name="file_ticket")
        async def file_ticket(inp: TicketInput) -> TicketResult:
            self.calls["file_ticket"] += 1
            return TicketResult(filed=True, ticket_id="T-1")

        @activity.defn(name="ticket_status")
        async def ticket_status(inp: TicketStatusInput) -> str:
            self.calls["ticket_status"] += 1
            if self.ticket_state == "resolved":
                self.health = Health.HEALTHY  # the vendor replaced the device
            return self.ticket_state

        @activity.defn(name="note_ticket")
        async def note_ticket(inp: TicketNoteInput) -> bool:
            self.calls["note_ticket"] += 1
            self.ticket_notes.append(inp.text)
            return self.ticket_state == "open"

        @activity.defn(name="report_to_node")
        async def report_to_node(inp: NodeReportInput) -> NodeReportResult:
            self.calls["report_to_node"] += 1
            self.node_reports.append(inp)
            return NodeReportResult(watch_id=f"node/{inp.watch.node}")

        @activity.defn(name="notify_step")
        async def notify_step(notice: StepNotice) -> StepNoticeResult:
            self.calls["notify_step"] += 1
            await self._pass("notify_step")
            await asyncio.sleep(self.notice_delay_s)
            if notice.step in self.notice_refused:
                raise ApplicationError(f"events is forbidden for {notice.reason}", type="Forbidden",
                                       non_retryable=True)
            self.notices.append(notice)
            self.order.append(notice.reason)
            return StepNoticeResult(recorded=[f"{p.namespace}/{p.name}" for p in notice.pods])

        return [discover_device, request_checkpoints, taint_device, remove_taint, restart_in_place,
                reschedule_same_node, reschedule_any_node, read_device_health, file_ticket, ticket_status,
                note_ticket, report_to_node, notify_step,
                *self.node_activities()]

    def node_activities(self) -> Sequence[Callable[..., Any]]:
        """Fakes of the node quarantine, taint holding and history activities."""

        @activity.defn(name="quarantine_node")
        async def quarantine_node(inp: QuarantineInput) -> QuarantineResult:
            self.calls["quarantine_node"] += 1
            self.quarantines.append(inp)
            return QuarantineResult(node_found=True, changed=True, detail="cordoned and tainted")

        @activity.defn(name="lift_quarantine")
        async def lift_quarantine(inp: QuarantineInput) -> QuarantineResult:
            self.calls["lift_quarantine"] += 1
            self.lifts.append(inp)
            return QuarantineResult(node_found=True, changed=True, detail="taint removed, uncordoned")

        @activity.defn(name="hold_taints")
        async def hold_taints(inp: HoldTaintsInput) -> list[str]:
            self.calls["hold_taints"] += 1
            return [d.object_name for d in inp.devices]

        @activity.defn(name="release_taints")
        async def release_taints(inp: HoldTaintsInput) -> list[UntaintResult]:
            self.calls["release_taints"] += 1
            return [UntaintResult(removed=True, detail="removed") for _ in inp.devices]

        @activity.defn(name="device_incidents_status")
        async def device_incidents_status(inp: DeviceIncidentsInput) -> list[DeviceIncidentStatus]:
            self.calls["device_incidents_status"] += 1
            return [DeviceIncidentStatus(incident_id=i, running=True) for i in inp.incidents]

        @activity.defn(name="previous_incidents")
        async def previous_incidents(inp: PreviousIncidentsInput) -> list[PreviousIncident]:
            self.calls["previous_incidents"] += 1
            return list(self.previous)

        @activity.defn(name="device_history")
        async def device_history(inp: PreviousIncidentsInput) -> DeviceHistory:
            self.calls["previous_incidents"] += 1
            return DeviceHistory(uuid=None, previous=list(self.previous), unread=self.history_unread)

        return [quarantine_node, lift_quarantine, hold_taints, release_taints, device_incidents_status,
                previous_incidents, device_history]

