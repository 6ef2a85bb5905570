"""A storm's turns, the Temporal side: ask the driver's keeper, tell incidents their turn came, give it back.

``ask_turn`` starts the keeper if none runs (signal-with-start, ``USE_EXISTING``), so the first
fenced incident of a storm brings it up; asking twice is harmless (the keeper knows each incident
once). ``admit_turns`` signals each admitted incident; one that is no longer running is named
back, and its turn counts as over. ``give_back_turn`` tells the keeper an incident closed.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from podmedic.domain import search
from podmedic.domain.storm_turns import (
    STORM_TURNS_WORKFLOW,
    TURN_SIGNAL,
    AdmitInput,
    AdmitResult,
    TurnOver,
    TurnRequest,
    TurnsInput,
    turns_workflow_id,
)
from podmedic.temporal.priorities import URGENT
from podmedic.temporal.signals import signal_if_open

SIGNALS_IN_FLIGHT = 50
"""Admitted incidents told at once by one ``admit_turns``."""


class TurnActivities:
    """Bound to one Temporal client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn(name="ask_turn")
    async def ask_turn(self, req: TurnRequest) -> None:
        """Queue the incident at its driver's keeper, starting the keeper when none runs."""
        await self.client.start_workflow(
            STORM_TURNS_WORKFLOW, TurnsInput(driver=req.driver, acting_limit=req.acting,
                                             search_attributes=req.search_attributes),
            id=turns_workflow_id(req.driver), task_queue=activity.info().task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="ask", start_signal_args=[req],
            priority=URGENT,  # every fenced incident waits on its tasks: not behind the storm's new incidents
            search_attributes=search.for_storm(req.driver) if req.search_attributes else None,
            static_summary=f"storm turns: {req.driver} incidents acting at once"[:200],
        )

    @activity.defn(name="give_back_turn")
    async def give_back_turn(self, over: TurnOver) -> bool:
        """Tell the keeper the incident closed; False when no keeper runs (nothing was held)."""
        return await signal_if_open(self.client, turns_workflow_id(over.driver), "done", over)

    @activity.defn(name="admit_turns")
    async def admit_turns(self, inp: AdmitInput) -> AdmitResult:
        """Signal each incident its turn came; those no longer running are named back."""
        slots = asyncio.Semaphore(SIGNALS_IN_FLIGHT)

        async def tell(incident_id: str) -> str | None:
            async with slots:
                return None if await signal_if_open(self.client, incident_id, TURN_SIGNAL) else incident_id

        told = await asyncio.gather(*(tell(i) for i in inp.incident_ids))
        return AdmitResult(gone=[i for i in told if i is not None])
