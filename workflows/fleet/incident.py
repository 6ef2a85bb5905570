"""A fleet incident: the record of a storm the guard tripped on, for the people who must look.

Started by the guard (id ``fleet/storm/<time>``, searchable as ``WorkflowType='FleetIncident'``
or ``PodmedicPhase='Tripped'``); it explains what the guard saw and closes when the guard
resumes (``storm_over``: an operator's word or the storm's clear time).
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain import search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.fleet_guard.messages import StormRecord


class FleetIncidentInput(BaseModel):
    """What the guard saw when it tripped."""

    storm: StormRecord
    search_attributes: bool = True


class FleetIncidentState(BaseModel):
    """The fleet incident as it is now."""

    storm: StormRecord
    open: bool
    resolution: str = ""


def _some(names: list[str], most: int = 20) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def details(storm: StormRecord) -> str:
    """Markdown for the Temporal UI's current details."""
    devices, nodes = _some(storm.devices), _some(storm.nodes)
    return (f"**Storm**: {storm.summary}\n\n"
            f"**Tripped at**: {storm.tripped_at.isoformat()}\n\n"
            f"**Driver**: {storm.driver}; **share**: {storm.share:.1%} of {storm.fleet} devices within "
            f"{storm.window_s:g}s\n\n**Nodes**: {nodes}\n\n**Incidents**: {devices}\n\n"
            "Every disruptive step of every incident waits. Likely causes: a detector bug, a power or "
            "network event, a driver crash. Resume with `podmedic guard resume --by NAME --reason TEXT`.")


@workflow.defn(name=names.FLEET_INCIDENT)
class FleetIncidentWorkflow:
    """Open while the guard is tripped on this storm."""

    @workflow.init
    def __init__(self, inp: FleetIncidentInput) -> None:
        self.inp = inp
        self.resolution: str | None = None

    @workflow.signal
    def storm_over(self, why: str) -> None:
        """The guard resumed: by an operator or because the storm cleared."""
        self.resolution = why

    @workflow.query
    def get_state(self) -> FleetIncidentState:
        """The storm and whether the guard still holds the fleet."""
        return FleetIncidentState(storm=self.inp.storm, open=self.resolution is None, resolution=self.resolution or "")

    @workflow.run
    async def run(self, inp: FleetIncidentInput) -> str:
        """Wait for the guard to resume; the explanation of how the storm ended."""
        workflow.set_current_details(details(inp.storm))
        await workflow.wait_condition(lambda: self.resolution is not None)
        if inp.search_attributes:
            workflow.upsert_search_attributes([search.PHASE.value_set("Closed")])
        workflow.set_current_details(details(inp.storm) + f"\n\n**Resolved**: {self.resolution}")
        return f"{inp.storm.summary}; {self.resolution}"
