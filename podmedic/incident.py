"""The incident record: live state (query), signals' payloads, and the final outcome."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from podmedic.models import DeviceRef, FailureMode, Outcome, Permanence, PodRef, TimelineEntry
from podmedic.steps import CheckpointReport, RecoveryResult


class Phase(StrEnum):
    """Where an incident is; mirrored into the ``PodmedicPhase`` search attribute."""

    OPENED = "Opened"
    WAITING_GRACE = "WaitingGrace"
    WATCHING = "Watching"
    DISCOVERING = "Discovering"
    CHECKPOINTING = "Checkpointing"
    TAINTING = "Tainting"
    RECOVERING = "Recovering"
    TICKETING = "Ticketing"
    AWAITING_HEAL = "AwaitingHeal"
    AWAITING_VENDOR = "AwaitingVendor"
    UNTAINTING = "Untainting"
    CLOSED = "Closed"


class Resolution(BaseModel):
    """An operator's or vendor's word that the device is fixed."""

    by: str = "operator"
    note: str = ""


class AbortRequest(BaseModel):
    """An operator stopping the incident."""

    by: str = "operator"
    reason: str


class IncidentState(BaseModel):
    """Everything known about an incident; returned by the ``state`` query."""

    incident_id: str
    device: DeviceRef
    phase: Phase = Phase.OPENED
    node: str | None = None
    failure_mode: FailureMode | None = None
    permanence: Permanence | None = None
    why: str = ""
    pods: list[PodRef] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)
    checkpoint: CheckpointReport | None = None
    taint_rule: str | None = None
    taint_removed: bool = False
    recovery: list[RecoveryResult] = Field(default_factory=list)
    ticket_id: str | None = None
    events_seen: int = 0
    flapping: bool = False
    node_incident: str | None = Field(None, description="The node-level incident this device is part of.")
    timeline: list[TimelineEntry] = Field(default_factory=list)


class IncidentOutcome(BaseModel):
    """How the incident ended, with enough detail to explain it."""

    incident_id: str
    device: str
    outcome: Outcome
    explanation: str
    failure_mode: FailureMode | None
    permanence: Permanence | None
    steps: list[str]
    checkpoint_ids: list[str]
    taint_rule: str | None
    taint_removed: bool
    recovered_by: str | None
    pod: PodRef | None
    ticket_id: str | None
    timeline: list[TimelineEntry]
