"""Announced maintenance: a node that will go away at a known time is not a failure, and is not fled at once.

A GPU VM cannot live-migrate: its cloud terminates it for host maintenance at a time it announces. GKE
writes that start time on the node as the label ``cloud.google.com/scheduled-maintenance-time`` (Unix
seconds; "Monitor maintenance events", GKE docs, 1.31.1-gke.2008000 and later, for every GPU and TPU
node) and takes the label away once the maintenance is over or withdrawn. Leaving at once loses the
work since the job's last checkpoint and the whole time to the deadline; waiting for the cloud loses the
same work at the deadline, and the node's pods then wait out the node lifecycle controller. podmedic
trains on until the latest safe moment, ``deadline - save_s - lead_s``: it asks every pod on the node
for a checkpoint then (``save_s``: the slowest pod's declared ``podmedic.io/checkpoint-s``, else the
policy's ``checkpoint.timeout_s``, the most it ever waits for a save), cordons the node and moves the
pods (a warm spare first), so they run elsewhere from a fresh checkpoint when the node goes. ``lead_s``
is what the move itself needs: evictions, the replacements' scheduling and start.

Pure models and functions: no I/O here (``workflows/node/maintenance.py`` runs it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceRef, PodRef
from podmedic.domain.policy_ref import PolicyRef

GKE_LABEL = "cloud.google.com/scheduled-maintenance-time"
MAINTENANCE_TAINT = "podmedic.io/maintenance"
SAVE_S = "podmedic.io/checkpoint-s"
"""Pod annotation: seconds the workload needs to save a checkpoint (it measured its own saves)."""


class MaintenanceNotice(BaseModel):
    """What the ingest read on a node: a deadline, none (withdrawn or over), or a notice it could not read."""

    node: str
    deadline: dt.datetime | None = Field(description="When the node goes; None: no maintenance announced now.")
    source: str
    problem: str = Field("", description="Why the notice could not be read (what was wrong, where); no deadline.")
    observed_at: dt.datetime
    event_id: str

    @property
    def workflow_id(self) -> str:
        """One maintenance incident per node at a time."""
        return f"maintenance/{self.node}"


def announced(node: str, deadline: dt.datetime, source: str, now: dt.datetime) -> MaintenanceNotice:
    """A notice of maintenance at ``deadline``: the same node and deadline are the same notice, whichever
    source told it (its event id holds the deadline in Unix seconds, as GKE's label writes it)."""
    return MaintenanceNotice(node=node, deadline=deadline, source=source, observed_at=now,
                             event_id=f"maintenance/{node}@{int(deadline.timestamp())}")


def withdrawn(node: str, source: str, now: dt.datetime, occurrence: str) -> MaintenanceNotice:
    """A notice that the node's maintenance is over or withdrawn; ``occurrence`` tells one withdrawal from
    another (the node's resourceVersion, a CloudEvent's id)."""
    return MaintenanceNotice(node=node, deadline=None, source=source, observed_at=now,
                             event_id=f"maintenance/{node}@withdrawn/{occurrence}")


def unreadable(node: str, text: str, source: str, now: dt.datetime, problem: str) -> MaintenanceNotice:
    """A notice whose time could not be read: no deadline, and what was wrong, where (the incident says it:
    a notice is not for podmedic to correct)."""
    return MaintenanceNotice(node=node, deadline=None, source=source, observed_at=now,
                             event_id=f"maintenance/{node}@{text}", problem=problem)


def notice_of(node: Obj, announced_before: bool, now: dt.datetime) -> MaintenanceNotice | None:
    """The notice ``node`` carries in GKE's label; with none, a withdrawal when one was announced before,
    else ``None``."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name") or "")
    value = (meta.get("labels") or {}).get(GKE_LABEL)
    source = f"node label {GKE_LABEL}"
    if value is None:
        return withdrawn(name, source, now, str(meta.get("resourceVersion", ""))) if announced_before else None
    try:
        deadline = dt.datetime.fromtimestamp(int(str(value)), dt.UTC)
    except (ValueError, OverflowError, OSError):
        return unreadable(name, str(value), source, now,
                          f"node {name} label {GKE_LABEL}={value!r}: not a time in Unix seconds")
    return announced(name, deadline, source, now)


def read_deadline(text: str) -> dt.datetime:
    """A deadline written as Unix seconds or as an RFC 3339 time with an offset; ``ValueError`` says what
    was wrong."""
    text = text.strip()
    try:
        return dt.datetime.fromtimestamp(int(text), dt.UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(f"{text[:40]!r} is neither Unix seconds nor an RFC 3339 time (2025-01-31T12:00:00Z)") \
            from None
    if when.tzinfo is None:
        raise ValueError(f"{text[:40]!r} has no offset: RFC 3339 times need one (Z or +hh:mm)")
    return when


def act_at(deadline: dt.datetime, save_s: float, lead_s: float) -> dt.datetime:
    """The latest safe moment: a checkpoint asked then is saved, and the pods moved, by the deadline."""
    return deadline - dt.timedelta(seconds=save_s + lead_s)


def request_id(notice: MaintenanceNotice) -> str:
    """The checkpoint and move requests of one announced deadline (a retry asks again under the same id)."""
    when = notice.deadline.isoformat() if notice.deadline else "none"
    return "mnt-" + hashlib.sha256(f"{notice.node}@{when}".encode()).hexdigest()[:12]


class MaintenanceInput(BaseModel):
    """Start argument of ``NodeMaintenance``: the first notice and the policy in force (by digest)."""

    notice: MaintenanceNotice
    policy_ref: PolicyRef
    search_attributes: bool = True


class PlanInput(BaseModel):
    """Which pods the node's maintenance moves, and how long their save takes."""

    node: str
    default_save_s: float


class MovingPod(BaseModel):
    """A pod on the node that holds a device: it moves before the deadline."""

    pod: PodRef
    device: DeviceRef
    save_s: float


class MaintenancePlan(BaseModel):
    """The node's pods with devices, the slowest save among them, and whether room waits elsewhere."""

    node_found: bool = True
    pods: list[MovingPod] = Field(default_factory=list)
    save_s: float = 0.0
    room: str = Field("", description="Where the pods can go, in words (free devices elsewhere, spares).")
    enough_room: bool = False


Outcome = Literal["moved", "withdrawn", "refused", "nothing_to_move", "not_all_moved", "node_not_back", "dry_run",
                  "failed"]


class MaintenanceOutcome(BaseModel):
    """How a node's maintenance went, with its timeline."""

    node: str
    outcome: Outcome
    explanation: str
    deadline: dt.datetime | None
    moved: list[str] = Field(default_factory=list, description="namespace/pod -> replacement on node, each")
    timeline: list[str] = Field(default_factory=list)
