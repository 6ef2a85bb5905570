"""The incident record: live state (query), signals' payloads, and the final outcome."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from pydantic import BaseModel, Field

from podmedic.domain.models import (
    DeviceHealthEvent,
    DeviceRef,
    FailureMode,
    Outcome,
    Permanence,
    PodKey,
    PodRef,
    TimelineEntry,
)
from podmedic.domain.steps import CheckpointReport, RecoveryResult


class Phase(StrEnum):
    """Where an incident is; mirrored into the ``PodmedicPhase`` search attribute."""

    OPENED = "Opened"
    WAITING_GRACE = "WaitingGrace"
    WATCHING = "Watching"
    DISCOVERING = "Discovering"
    CHECKPOINTING = "Checkpointing"
    AWAITING_APPROVAL = "AwaitingApproval"
    THROTTLED = "Throttled"
    TAINTING = "Tainting"
    RECOVERING = "Recovering"
    TICKETING = "Ticketing"
    AWAITING_HEAL = "AwaitingHeal"
    AWAITING_VENDOR = "AwaitingVendor"
    UNTAINTING = "Untainting"
    CLOSED = "Closed"


STEPS = ("checkpoint", "taint", "in_place_restart", "same_node", "any_node", "ticket", "node_quarantine", "untaint")
"""Steps an operator can approve (when gated) or skip; a gate on ``taint_no_execute`` gates ``taint``.
``untaint`` is asked only when no source can see the device to verify it; skipping it keeps the taint."""


class IncidentStopped(Exception):
    """Raised inside the workflow to end early with a given outcome (abort, not actionable, ...)."""

    def __init__(self, outcome: Outcome, explanation: str) -> None:
        super().__init__(explanation)
        self.outcome = outcome
        self.explanation = explanation


class Resolution(BaseModel):
    """An operator's or vendor's word that the device is fixed."""

    by: str = "operator"
    note: str = ""


class AbortRequest(BaseModel):
    """An operator stopping the incident."""

    by: str = "operator"
    reason: str


class ApprovalRequest(BaseModel):
    """An operator approving the step the incident waits on."""

    step: str
    by: str = "operator"
    note: str = ""


class SkipRequest(BaseModel):
    """An operator telling the incident not to take a step (now, if it waits on it, or later)."""

    step: str
    by: str = "operator"
    reason: str = ""


class OperatorAnswer(BaseModel):
    """What an accepted update did, for the operator's terminal."""

    incident_id: str
    accepted: str
    phase: Phase


class PendingApproval(BaseModel):
    """A gate the incident waits on."""

    step: str
    action: str = Field(description="What will be done once approved, for a person.")
    gate: str = Field(description="The policy gate that holds it, e.g. taint_no_execute.")
    since: dt.datetime
    timeout_s: float
    on_timeout: str


class Decision(BaseModel):
    """How a gate or a skip was settled, and by whom."""

    step: str
    decision: str = Field(description="approved, skipped, aborted, canceled (a Temporal cancel request), "
                                      "timed_out_proceed or timed_out_abort.")
    by: str
    at: dt.datetime
    note: str = ""


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
    node_failures: list[str] = Field(default_factory=list, description="Other devices of the node that failed "
                                                                       "within the correlation window, as its watch "
                                                                       "said when this one was reported.")
    previous_incidents: list[str] = Field(default_factory=list, description="Earlier incidents of the device "
                                          "within the repeat-offender window (workflow id@run id).")
    repeat_offender: bool = False
    pending_approval: PendingApproval | None = None
    decisions: list[Decision] = Field(default_factory=list, description="Approvals, skips, timeouts, aborts.")
    skip: dict[str, str] = Field(default_factory=dict, description="Steps an operator skipped: step → reason.")
    doing: str = Field("", description="What the incident is doing now, for a person.")
    timeline: list[TimelineEntry] = Field(default_factory=list, description="The first TIMELINE_HEAD lines and "
                                          "the latest up to TIMELINE_KEPT in all; the lines between are folded.")
    timeline_folded: int = Field(0, description="Timeline lines folded out of the middle (a chatty device's reports "
                                                "would otherwise grow every query and the result without bound).")


TIMELINE_HEAD = 50
"""Timeline lines always kept from the start: how the incident opened, was classified and acted."""
TIMELINE_KEPT = 500
"""Timeline lines kept in all (at a few hundred bytes each, far below Temporal's 2 MB payload limit)."""


def fold_timeline(state: IncidentState) -> None:
    """Keep the timeline within ``TIMELINE_KEPT`` lines: the first ``TIMELINE_HEAD`` and the latest; count
    what is folded out of the middle."""
    extra = len(state.timeline) - TIMELINE_KEPT
    if extra > 0:
        del state.timeline[TIMELINE_HEAD:TIMELINE_HEAD + extra]
        state.timeline_folded += extra


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
    checkpoint: str = Field("", description="The job's checkpoint: complete/partial/none with pods saved, e.g. "
                            "'partial: 2/3 pods'.")
    taint_rule: str | None
    taint_removed: bool
    recovered_by: str | None
    pod: PodRef | None
    ticket_id: str | None
    timeline: list[TimelineEntry]
    decisions: list[Decision] = Field(default_factory=list)
    timeline_folded: int = Field(0, description="Timeline lines folded out of the middle (``IncidentState``).")


class StepNotice(BaseModel):
    """One step told to the affected pods: one Kubernetes Event per (incident run, step, pod)."""

    incident_id: str
    run_id: str
    step: str = Field(description="opened, checkpointed, tainted, restarted, rescheduled, ticketed, closed, ...")
    reason: str = Field(description="CamelCase Event reason, e.g. PodmedicTainted.")
    message: str
    pods: list[PodKey]
    warning: bool = False
    annotated: list[PodKey] = Field(
        default_factory=list,
        description="Pods of ``pods`` an earlier notice of this run found and annotated: only their Event is "
                    "written, without reading the pod again.")


class StepNoticeResult(BaseModel):
    """Pods that got the Event, and pods already gone."""

    recorded: list[str] = Field(default_factory=list)
    gone: list[str] = Field(default_factory=list)


class VendorWaitCarry(BaseModel):
    """What a run waiting for the vendor hands the run it continues as (Temporal's continue-as-new), so a
    weeks-long wait and a chatty device stay far below Temporal's history limits: the record, the reports
    that still count, the operators' words, and where the wait stands. It travels in ``IncidentInput.carry``."""

    state: IncidentState
    events: list[DeviceHealthEvent] = Field(description="The reports since the ticket (the news the wait reads), "
                                                        "the latest EVENTS_CARRIED of them.")
    seen_ids: list[str] = Field(default_factory=list, description="Their event ids, to drop repeats.")
    resolution: Resolution | None = None
    resolved_by_operator: bool = False
    approved: list[str] = Field(default_factory=list)
    done: list[str] = Field(default_factory=list)
    guard_asked: bool = False
    turn_asked: bool = False
    annotated: list[PodKey] = Field(default_factory=list)
    deadline: dt.datetime = Field(description="When the vendor wait gives up (ticket.wait_resolution_s from its "
                                              "start, whatever run it is in).")
    gap_s: float = Field(description="The next gap between the backend's status calls.")
    read_healthy: bool = False
    runs: int = Field(1, description="Runs the wait has continued across, this one included.")


EVENTS_CARRIED = 200
"""Reports carried into a continued run: what the wait's checks read is the latest of them."""
VENDOR_WAIT_HISTORY = 10_000
"""History events past which a vendor wait continues as a new run (``workflows/closing/vendor_ticket.py``;
Temporal warns
at 10,240 and ends a run at 51,200): a device reporting every second would otherwise reach the limit in hours."""
