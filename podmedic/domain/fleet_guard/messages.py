"""The fleet guard's policy and messages: how much podmedic may disrupt at once, and storms.

The ``guard:`` section sits beside ``drivers:`` in the policy file; the loader copies it into
every driver's resolved policy, so it travels in each incident's input like the rest.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.models import DeviceRef
from podmedic.domain.spares import SparesReport

GUARD_WORKFLOW_ID = "fleet/guard"
"""The one guard of a Temporal namespace: every incident asks it (start if absent, then the ask update)."""

DISRUPTIVE_STEPS = ("taint", "in_place_restart", "same_node", "any_node", "node_quarantine")
"""Steps that change what runs on the fleet; each asks the guard first."""


class PermitRequest(BaseModel):
    """An incident asking to take a disruptive step now."""

    incident_id: str
    device: DeviceRef
    node: str | None = None
    step: str
    policy: GuardPolicy
    search_attributes: bool = True
    override_by: str | None = Field(None, description="An operator approved the step past a limit.")
    probe: bool = Field(False, description="Dry run: answer what the guard would do, record nothing.")
    counts: bool = Field(True, description="Count the device as unhealthy toward a storm (a node incident's "
                                           "devices count through their own incidents).")
    hardware: bool = Field(True, description="False when the workload caused the fault (its own code): it holds "
                                             "a permit like any disruption, but is no sign of a storm.")


class PermitAnswer(BaseModel):
    """The guard's answer; ``limit`` names what refused it (empty when granted)."""

    granted: bool
    limit: str = ""
    detail: str = ""
    storm: bool = False
    devices_tainted: int = 0
    nodes_disrupted: int = 0
    tripped: bool = False


class PermitRequests(BaseModel):
    """Several incidents' asks in one ``ask_many`` update, answered in order."""

    requests: list[PermitRequest]


class PermitAnswers(BaseModel):
    """The guard's answers to ``PermitRequests``, in the requests' order."""

    answers: list[PermitAnswer]


class Sighting(BaseModel):
    """A device the ingest saw fail during a storm, before its incident asked the guard."""

    incident_id: str
    device: DeviceRef
    node: str | None = None


class Sightings(BaseModel):
    """The ingest's ``sighted`` signal: devices that failed since its last one
    (``workers/ingest/guard_sightings.py``)."""

    sightings: list[Sighting]


class FleetSizeInput(BaseModel):
    """Input of the ``fleet_size`` activity (no parameters yet)."""

    driver: str | None = Field(None, description="Only this driver's slices; all when None.")


class PermitRelease(BaseModel):
    """An incident that closed gives back what it held."""

    incident_id: str


class HoldersInput(BaseModel):
    """Input of the ``closed_holders`` activity: the incidents holding permits."""

    incidents: list[str]


class ClosedHolder(BaseModel):
    """A permit holder whose latest run closed without giving the permit back."""

    incident_id: str
    status: str = Field(description="How its run closed: terminated, failed, canceled, timed_out, completed, "
                                    "continued_as_new, or not found.")


class SweepInput(BaseModel):
    """Input of the ``sweep_taint_rules`` activity."""

    grace_s: float = Field(description="A holder is taken off only once its run has been closed this long.")


class SweepReport(BaseModel):
    """What one sweep of podmedic's DeviceTaintRules changed, a line per rule, and what it left for later."""

    changed: list[str] = Field(default_factory=list)
    kept: list[str] = Field(default_factory=list, description="Rules with no holder kept: their device "
                                                              "reads Unknown, or the change was refused.")


class ResumeRequest(BaseModel):
    """An operator ending a storm pause."""

    by: str
    reason: str


class Observation(BaseModel):
    """A device seen unhealthy (its first ask) or first granted, with when."""

    incident_id: str
    driver: str
    pool: str
    node: str
    at: dt.datetime


class Permit(BaseModel):
    """What one incident holds: its device, and its node as disrupted."""

    incident_id: str
    driver: str
    pool: str
    node: str
    since: dt.datetime
    override_by: str | None = None


class FleetSize(BaseModel):
    """Devices per driver and per ``driver/pool``, read from ResourceSlices."""

    drivers: dict[str, int] = Field(default_factory=dict)
    pools: dict[str, int] = Field(default_factory=dict)
    read_at: dt.datetime | None = None


class StormRecord(BaseModel):
    """What the guard saw when it tripped."""

    tripped_at: dt.datetime
    driver: str
    devices: list[str]
    nodes: list[str]
    unhealthy: int
    fleet: int
    share: float
    window_s: float
    fleet_incident: str = ""

    @property
    def summary(self) -> str:
        """One line for a person."""
        return (f"{self.unhealthy} of {self.fleet} {self.driver} devices ({self.share:.0%}) turned unhealthy "
                f"within {self.window_s:g}s on {len(self.nodes)} node(s)")


class Ledger(BaseModel):
    """The guard's book; carried across continue-as-new."""

    permits: dict[str, Permit] = Field(default_factory=dict)
    seen: list[Observation] = Field(default_factory=list)
    grants: list[Observation] = Field(default_factory=list)
    waiting: list[str] = Field(default_factory=list)
    waiting_since: dict[str, dt.datetime] = Field(default_factory=dict, description="When each waiting incident "
                                                                                   "was first refused a permit.")
    counted: list[str] = Field(default_factory=list, description="Open incidents already counted as unhealthy "
                                                                 "(once each, however long they stay open).")
    storm: StormRecord | None = None
    storms_since: dt.datetime | None = Field(None, description="Observations before this were acknowledged by "
                                                               "an operator's resume: they cannot trip again.")
    clear_since: dt.datetime | None = None
    history: list[str] = Field(default_factory=list, description="Last trips and resumes, for a person.")


class GuardInput(BaseModel):
    """Start (and continue-as-new) argument of the guard."""

    policy: GuardPolicy
    search_attributes: bool = True
    ledger: Ledger = Field(default_factory=Ledger)
    fleet: FleetSize | None = None
    spares: SparesReport | None = Field(None, description="The last keeping of warm spares, carried across "
                                                          "continue-as-new (spares held are given back later)")


class GuardStatus(BaseModel):
    """The guard as it is now (``podmedic guard status``); ``idle`` before any incident asked one (the
    configured limits, nothing held)."""

    state: Literal["idle", "ok", "tripped"]
    devices_tainted: int
    nodes_disrupted: int
    permits: list[Permit]
    waiting: list[str]
    waiting_since: dict[str, dt.datetime] = Field(default_factory=dict)
    storm: StormRecord | None
    clear_since: dt.datetime | None
    fleet: FleetSize | None
    policy: GuardPolicy
    history: list[str]
    spares: SparesReport | None = Field(None, description="The last keeping of warm spares (None: none kept).")

    @property
    def waiting_summary(self) -> str:
        """How many incidents wait for a permit, and since when (the oldest)."""
        if not self.waiting:
            return "no incident waits for a permit"
        known = sorted((self.waiting_since[i], i) for i in self.waiting if i in self.waiting_since)
        if not known:
            return f"{len(self.waiting)} incident(s) wait for a permit"
        at, oldest = known[0]
        return (f"{len(self.waiting)} incident(s) wait for a permit, the oldest since "
                f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%SZ} ({oldest})")
