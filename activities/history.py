"""A device's previous incidents, from Temporal visibility: for repeat offenders and evidence.

Every incident of a device is a run of the same workflow id (``device/<driver>/<pool>/<device>``),
so its history is one visibility query by workflow id and start time. Runs that were not
about a device fault do not count: ``not_actionable`` outcomes, and runs whose failure mode
blames the workload (``container_code``, ``bad_config``: e.g. XID 13 or 31, which NVIDIA's XID
catalog resolves by restarting the application).

A slot is not a GPU. Where the driver publishes the GPU's UUID in its ResourceSlice (NVIDIA's DRA
driver does, as the device attribute ``uuid``), every incident records it (``PodmedicDeviceUuids``),
and the history follows the GPU: its incidents under another name count (a GPU moved to another
server, or named anew when a reboot enumerates the GPUs in another order), and the incidents of the
GPU a replacement took the slot from do not (the new board starts clean).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.client import Client

from activities.tickets.evidence import device_attributes
from podmedic.domain import search
from podmedic.domain.models import DeviceRef, FailureMode
from podmedic.kube.gateway import KubeError, KubeGateway

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
    device: str | None = Field(None, description="The device's resource id the run was about, when not the "
                                                 "asking incident's (the same GPU under another name).")


class PreviousIncidentsInput(BaseModel):
    """The device, the window to look back over, and the run asking (left out of the answer)."""

    device: DeviceRef
    window_s: float = Field(gt=0)
    now: dt.datetime = Field(description="The asking workflow's time, so the window is the one it means.")
    exclude_run: str = ""


class DeviceHistory(BaseModel):
    """What the device's history says: the GPU now in the slot and its earlier incidents."""

    uuid: str | None = Field(None, description="The UUID of the GPU now in the slot (its ResourceSlice "
                                               "attribute); None where the driver publishes none.")
    previous: list[PreviousIncident] = Field(default_factory=list, description="Newest first.")
    other_gpu: int = Field(0, ge=0, description="Earlier incidents of this slot left out: another GPU "
                                                "(another UUID) was in it then.")
    unread: str | None = Field(None, description="Why the GPU's UUID could not be read (the history then "
                                                 "counts by slot); None when it was read or none is published.")


async def device_uuid(kube: KubeGateway, device: DeviceRef) -> str | None:
    """The GPU's UUID as its driver publishes it in the ResourceSlice (attribute ``uuid``, or
    ``<domain>/uuid``); ``None`` when the device or the attribute is not there."""
    attributes = (await device_attributes(kube, device)).get("attributes") or {}
    found = [value for name, value in attributes.items() if name == "uuid" or name.endswith("/uuid")]
    return str(found[0]) if found and found[0] else None


def _quoted(text: str) -> str:
    return text.replace("'", "")


async def previous_incidents(client: Client, device: DeviceRef, window_s: float, *,
                             now: dt.datetime | None = None, exclude_run: str = "", uuid: str | None = None,
                             limit: int = 100) -> DeviceHistory:
    """The device's incidents started within ``window_s`` before ``now``, newest first.

    Reusable outside the workflow (the ticket's evidence bundle lists them too). Runs whose
    outcome says the device was not at fault are left out. With ``uuid``, the GPU's incidents under
    other names count too, and this slot's incidents of another GPU do not.
    """
    now = now or dt.datetime.now(dt.UTC)
    since = (now - dt.timedelta(seconds=window_s)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    who = f"WorkflowId = '{_quoted(device.workflow_id)}'"
    if uuid:
        who = f"({who} OR {search.DEVICE_UUIDS.name} = '{_quoted(uuid)}')"
    history = DeviceHistory(uuid=uuid)
    async for wf in client.list_workflows(f"{who} AND StartTime >= '{since}'", limit=limit):
        attrs = wf.typed_search_attributes
        if wf.run_id == exclude_run:
            continue
        outcome = attrs.get(search.OUTCOME)
        if outcome in NOT_COUNTED or attrs.get(search.FAILURE_MODE) in WORKLOAD_MODES:
            continue
        recorded = attrs.get(search.DEVICE_UUIDS) or []
        if uuid and recorded and uuid not in recorded:  # the slot held another GPU then
            history.other_gpu += 1
            continue
        history.previous.append(PreviousIncident(
            workflow_id=wf.id, run_id=wf.run_id, started=wf.start_time, closed=wf.close_time,
            status=wf.status.name.lower() if wf.status else "unknown", outcome=outcome,
            device=None if wf.id == device.workflow_id else wf.id.removeprefix("device/")))
    history.previous.sort(key=lambda p: p.started, reverse=True)
    return history


class HistoryActivities:
    """Activities that read Temporal visibility (and the device's ResourceSlice, for its UUID)."""

    def __init__(self, client: Client, kube: KubeGateway) -> None:
        self.client = client
        self.kube = kube

    @activity.defn(name="previous_incidents")
    async def previous_incidents(self, inp: PreviousIncidentsInput) -> list[PreviousIncident]:
        """The device's earlier incidents within the window (the asking run left out), by slot only.

        Kept for incidents of release 0.1.0, whose history asks it; newer ones ask ``device_history``.
        """
        found = await previous_incidents(self.client, inp.device, inp.window_s, now=inp.now,
                                         exclude_run=inp.exclude_run)
        return found.previous

    @activity.defn(name="device_history")
    async def device_history(self, inp: PreviousIncidentsInput) -> DeviceHistory:
        """The GPU now in the slot (its UUID) and its earlier incidents within the window, under any name."""
        uuid, unread = None, None
        try:
            uuid = await device_uuid(self.kube, inp.device)
        except KubeError as err:  # the history still counts by slot; the UUID is the better key, not the only one
            unread = f"its ResourceSlice could not be read: {err}"[:300]
        history = await previous_incidents(self.client, inp.device, inp.window_s, now=inp.now,
                                           exclude_run=inp.exclude_run, uuid=uuid)
        history.unread = unread
        return history
