"""A device's previous incidents, from Temporal visibility: for repeat offenders and evidence.

Every incident of a device is a run of the same workflow id (``device/<driver>/<pool>/<device>``),
so its history is one visibility query by workflow id and start time. Runs that were not
about a device fault do not count: ``not_actionable`` outcomes, and runs whose failure mode
blames the workload (``container_code``, ``bad_config``: e.g. XID 13 or 31, which NVIDIA's XID
catalog resolves by restarting the application).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.client import Client

from podmedic.domain import search
from podmedic.domain.models import DeviceRef, FailureMode

NOT_COUNTED = {"not_actionable"}
WORKLOAD_MODES = {mode.value for mode in FailureMode if mode.blames_the_workload}


class PreviousIncident(BaseModel):
    """One earlier run of the device's incident workflow."""

    workflow_id: str
    run_id: str
    started: dt.datetime
    closed: dt.datetime | None = None
    status: str
    outcome: str | None = Field(None, description="PodmedicOutcome when the run recorded one.")


class PreviousIncidentsInput(BaseModel):
    """The device, the window to look back over, and the run asking (left out of the answer)."""

    device: DeviceRef
    window_s: float = Field(gt=0)
    now: dt.datetime = Field(description="The asking workflow's time, so the window is the one it means.")
    exclude_run: str = ""


async def previous_incidents(client: Client, device: DeviceRef, window_s: float, *,
                             now: dt.datetime | None = None, exclude_run: str = "",
                             limit: int = 100) -> list[PreviousIncident]:
    """The device's incidents started within ``window_s`` before ``now``, newest first.

    Reusable outside the workflow (the ticket's evidence bundle lists them too). Runs whose
    outcome says the device was not at fault are left out.
    """
    now = now or dt.datetime.now(dt.UTC)
    since = (now - dt.timedelta(seconds=window_s)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    workflow_id = device.workflow_id.replace("'", "")
    query = f"WorkflowId = '{workflow_id}' AND StartTime >= '{since}'"
    found: list[PreviousIncident] = []
    async for wf in client.list_workflows(query, limit=limit):
        if wf.run_id == exclude_run:
            continue
        outcome = wf.typed_search_attributes.get(search.OUTCOME)
        if outcome in NOT_COUNTED or wf.typed_search_attributes.get(search.FAILURE_MODE) in WORKLOAD_MODES:
            continue
        found.append(PreviousIncident(workflow_id=wf.id, run_id=wf.run_id, started=wf.start_time,
                                      closed=wf.close_time, status=wf.status.name.lower() if wf.status else "unknown",
                                      outcome=outcome))
    return sorted(found, key=lambda p: p.started, reverse=True)


class HistoryActivities:
    """Activities that read Temporal visibility."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn(name="previous_incidents")
    async def previous_incidents(self, inp: PreviousIncidentsInput) -> list[PreviousIncident]:
        """The device's earlier incidents within the window (the asking run left out)."""
        return await previous_incidents(self.client, inp.device, inp.window_s, now=inp.now,
                                        exclude_run=inp.exclude_run)
