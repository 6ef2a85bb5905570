"""A storm's turns: at most ``storm_fence.acting`` device incidents of a driver act at once.

In a hall-wide event every device is fenced at once (its pool's rule, then its own), but each
incident's later steps (discovery, checkpoint, recovery, the close) need the worker to hold the
workflow in its cache: with ten thousand acting at once and a cache of 1,500, nearly every
workflow task replays its incident from history and almost none finish. So an incident opened
in a storm, once fenced, waits for its turn from the driver's ``StormTurns`` workflow
(``workflows/fleet/storm_turn_keeper.py``), which lets ``acting`` of them on at a time, first asked first
served, and lets the next one on when one closes.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from podmedic.domain.models import DriverName, TimelineEntry

STORM_TURNS_WORKFLOW = "StormTurns"
"""By name: the activities that start it may not import the workflow."""
TURN_SIGNAL = "storm_turn"
"""The device incident's signal that its turn came."""


def turns_workflow_id(driver: str) -> str:
    """The driver's one turn-keeper: every storm incident of the driver asks it."""
    return f"storm/{driver}"


class TurnRequest(BaseModel):
    """A fenced storm incident asking for its turn (``ask_turn``; the keeper's ``ask`` signal)."""

    incident_id: str
    driver: DriverName
    acting: int = Field(ge=1, description="The incident's policy's storm_fence.acting: the newest ask sets it.")
    search_attributes: bool = True


class TurnOver(BaseModel):
    """An incident that had its turn (or stopped waiting) closed: the keeper's ``done`` signal."""

    incident_id: str
    driver: DriverName


class TurnsInput(BaseModel):
    """Start (or continue-as-new) the keeper; a continued run carries who acts and who waits."""

    driver: DriverName
    acting_limit: int = Field(ge=1)
    search_attributes: bool = True
    acting: list[str] = Field(default_factory=list, description="Incidents given their turn, not yet closed.")
    waiting: list[str] = Field(default_factory=list, description="Incidents waiting, first asked first.")
    admitted: int = Field(0, description="Turns given since the storm began (across continue-as-new).")
    closed: int = Field(0, description="Turns given back since the storm began.")
    began: dt.datetime | None = None


class TurnsState(BaseModel):
    """What the keeper is doing, for the UI and the CLI (the ``get_state`` query)."""

    driver: DriverName
    acting_limit: int
    acting: int
    waiting: int
    admitted: int
    closed: int
    timeline: list[TimelineEntry] = Field(default_factory=list)


class AdmitInput(BaseModel):
    """Tell these incidents their turn came (``admit_turns``)."""

    incident_ids: list[str]


class AdmitResult(BaseModel):
    """Incidents that could not be told: they are no longer running (their turn is over)."""

    gone: list[str] = Field(default_factory=list)
