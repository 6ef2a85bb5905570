"""An incident's durable record, read from its Temporal history.

The history outlives the pods, the worker and the policy file: what started the
incident, every health event it got, every activity and timer with its times and
result, every operator update and signal, and how it ended. Payloads are decoded as
plain JSON, so the record reads the same for every podmedic workflow type.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from pydantic import BaseModel, Field
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory

from podmedic.domain import workflow_names as names


class Action(BaseModel):
    """One thing the incident did or waited for (an activity or a timer), or an operator's call."""

    kind: str = Field(description="activity, local activity (recorded when its workflow task completed), "
                                  "timer, update or signal")
    name: str
    summary: str = ""
    at: dt.datetime
    finished_at: dt.datetime | None = None
    status: str = "open"
    attempts: int = 1
    detail: str = ""
    by: str = ""
    result: Any = None


class Record(BaseModel):
    """Everything the history holds about one incident run."""

    workflow_id: str
    run_id: str
    workflow_type: str
    opened_at: dt.datetime
    closed_at: dt.datetime | None = None
    status: str = "Running"
    summary: str = ""
    details: str = ""
    input: Any = None
    health_events: list[dict[str, Any]] = Field(default_factory=list)
    actions: list[Action] = Field(default_factory=list)
    result: Any = None
    failure: str = ""


_ACTIVITY_END = {
    "activity_task_completed_event_attributes": "completed",
    "activity_task_failed_event_attributes": "failed",
    "activity_task_timed_out_event_attributes": "timed_out",
    "activity_task_canceled_event_attributes": "canceled",
}
_RUN_END = {
    "workflow_execution_failed_event_attributes": "Failed",
    "workflow_execution_terminated_event_attributes": "Terminated",
    "workflow_execution_timed_out_event_attributes": "TimedOut",
    "workflow_execution_canceled_event_attributes": "Canceled",
    "workflow_execution_continued_as_new_event_attributes": "ContinuedAsNew",
}


LOCAL_ACTIVITY_MARKER = "core_local_activity"


def _time(event: HistoryEvent) -> dt.datetime:
    return event.event_time.ToDatetime(tzinfo=dt.UTC)


def local_activity_marker(event: HistoryEvent) -> dict[str, Any] | None:
    """What a local activity's marker records (``activity_type``, ``attempt``, ...); ``None``
    for any other event. The fence runs as one: it has no activity events of its own."""
    if not event.HasField("marker_recorded_event_attributes"):
        return None
    marker = event.marker_recorded_event_attributes
    if marker.marker_name != LOCAL_ACTIVITY_MARKER or "data" not in marker.details:
        return None
    data: dict[str, Any] = json.loads(marker.details["data"].payloads[0].data)
    return data


class _Reader:
    def __init__(self, client: Client) -> None:
        self.conv = client.data_converter.payload_converter

    def one(self, payloads: Payloads) -> Any:
        values = self.conv.from_payloads(list(payloads.payloads)) if payloads.payloads else []
        return values[0] if values else None

    def text(self, payload: Payload) -> str:
        return str(self.conv.from_payloads([payload])[0]) if payload.data else ""


def read_record(client: Client, workflow_id: str, run_id: str, history: WorkflowHistory) -> Record:
    """Fold a fetched history into a ``Record``."""
    r = _Reader(client)
    rec: Record | None = None
    open_by_id: dict[int, Action] = {}
    updates: dict[str, Action] = {}
    for ev in history.events:
        kind = ev.WhichOneof("attributes")
        if kind == "workflow_execution_started_event_attributes":
            a = ev.workflow_execution_started_event_attributes
            rec = Record(workflow_id=workflow_id, run_id=run_id, workflow_type=a.workflow_type.name,
                         opened_at=_time(ev), input=r.one(a.input), summary=r.text(ev.user_metadata.summary),
                         details=r.text(ev.user_metadata.details))
            continue
        if rec is None:
            continue
        if kind == "workflow_execution_signaled_event_attributes":
            s = ev.workflow_execution_signaled_event_attributes
            value = r.one(s.input)
            if s.signal_name == names.HEALTH_EVENT and isinstance(value, dict):
                rec.health_events.append({**value, "received_at": _time(ev).isoformat()})
            else:
                rec.actions.append(Action(kind="signal", name=s.signal_name, at=_time(ev), status="received",
                                          by=s.identity, result=value))
        elif kind == "activity_task_scheduled_event_attributes":
            s2 = ev.activity_task_scheduled_event_attributes
            open_by_id[ev.event_id] = Action(kind="activity", name=s2.activity_type.name, at=_time(ev),
                                             summary=r.text(ev.user_metadata.summary))
            rec.actions.append(open_by_id[ev.event_id])
        elif kind == "activity_task_started_event_attributes":
            st = ev.activity_task_started_event_attributes
            if st.scheduled_event_id in open_by_id:
                open_by_id[st.scheduled_event_id].attempts = max(st.attempt, 1)
        elif kind in _ACTIVITY_END:
            attrs = getattr(ev, kind)
            action = open_by_id.get(attrs.scheduled_event_id)
            if action is None:
                continue
            action.finished_at = _time(ev)
            action.status = _ACTIVITY_END[kind]
            if kind == "activity_task_completed_event_attributes":
                action.result = r.one(attrs.result)
            elif hasattr(attrs, "failure") and attrs.HasField("failure"):
                action.detail = attrs.failure.message
        elif (local := local_activity_marker(ev)) is not None:
            m = ev.marker_recorded_event_attributes
            failed = m.HasField("failure")
            rec.actions.append(Action(
                kind="local activity", name=str(local.get("activity_type", "?")), at=_time(ev),
                finished_at=_time(ev), status="failed" if failed else "completed",
                attempts=int(local.get("attempt") or 1), summary=r.text(ev.user_metadata.summary),
                detail=m.failure.message if failed else "",
                result=r.one(m.details["result"]) if "result" in m.details else None))
        elif kind == "timer_started_event_attributes":
            t = ev.timer_started_event_attributes
            open_by_id[ev.event_id] = Action(kind="timer", name=f"timer {t.timer_id}", at=_time(ev),
                                             summary=r.text(ev.user_metadata.summary),
                                             detail=f"{t.start_to_fire_timeout.ToTimedelta().total_seconds():g}s")
            rec.actions.append(open_by_id[ev.event_id])
        elif kind in ("timer_fired_event_attributes", "timer_canceled_event_attributes"):
            action = open_by_id.get(getattr(ev, kind).started_event_id)
            if action is not None:
                action.finished_at = _time(ev)
                action.status = "fired" if kind == "timer_fired_event_attributes" else "canceled (woken early)"
        elif kind == "workflow_execution_update_accepted_event_attributes":
            u = ev.workflow_execution_update_accepted_event_attributes.accepted_request
            action = Action(kind="update", name=u.input.name, at=_time(ev), status="accepted",
                            by=u.meta.identity, result=r.one(u.input.args))
            updates[u.meta.update_id] = action
            rec.actions.append(action)
        elif kind == "workflow_execution_update_completed_event_attributes":
            c = ev.workflow_execution_update_completed_event_attributes
            action = updates.get(c.meta.update_id)
            if action is not None:
                action.finished_at = _time(ev)
                action.status = "completed" if c.outcome.HasField("success") else "failed"
                if c.outcome.HasField("success"):
                    answer = r.one(c.outcome.success)
                    action.detail = answer.get("accepted", "") if isinstance(answer, dict) else str(answer)
        elif kind == "workflow_execution_completed_event_attributes":
            rec.status, rec.closed_at = "Completed", _time(ev)
            rec.result = r.one(ev.workflow_execution_completed_event_attributes.result)
        elif kind in _RUN_END:
            rec.status, rec.closed_at = _RUN_END[kind], _time(ev)
            attrs = getattr(ev, kind)
            rec.failure = attrs.failure.message if hasattr(attrs, "failure") and attrs.HasField("failure") else \
                getattr(attrs, "reason", "")
    if rec is None:
        raise ValueError(f"history of {workflow_id} has no start event")
    return rec


async def fetch_record(client: Client, workflow_id: str, run_id: str | None = None) -> Record:
    """The record of ``workflow_id`` (its latest run unless ``run_id`` is given)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    desc = await handle.describe()
    history = await client.get_workflow_handle(workflow_id, run_id=desc.run_id).fetch_history()
    return read_record(client, workflow_id, desc.run_id, history)
