"""Repeat offenders: a device with K incidents within a window is treated as permanently failed.

At discovery the incident asks Temporal visibility for the device's earlier incidents (every
incident of a device is a run of the same workflow id; where the driver publishes the GPU's UUID,
also the GPU's incidents under another name, and not those of a GPU the slot held before:
``activities/history.py``). With this one they make K or more: the failure is permanent (NoExecute
taint, permanent ladder without in-place restart, vendor ticket), and the timeline and details say
which incidents made it so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.history import DeviceHistory, HistoryActivities, PreviousIncident, PreviousIncidentsInput
    from podmedic.domain import search
    from podmedic.domain.models import Permanence
    from podmedic.domain.policy_recovery import LadderRung
    from workflows.activity_options import URGENT
    from workflows.context import IncidentContext

DEVICE_HISTORY_BY_UUID = "device-history-by-uuid"
"""Patch: the history is asked of ``device_history`` (the GPU's UUID) instead of ``previous_incidents``."""


async def check(wf: IncidentContext) -> None:
    """Mark the incident a repeat offender (permanent) when the device's history says so."""
    rule = wf.policy.repeat_offenders
    if rule.incidents == 0:
        return
    mode = wf.state.failure_mode
    if mode is not None and mode.blames_the_workload:
        wf.note("classify", f"repeat-offender check skipped: the workload caused this fault ({mode}), "
                            "which counts against no device")
        return
    ask = PreviousIncidentsInput(device=wf.inp.device, window_s=rule.window_s, now=workflow.now(),
                                 exclude_run=workflow.info().run_id)
    options = _history_options(wf.inp.device.resource_id, rule.window_s)
    try:
        if workflow.patched(DEVICE_HISTORY_BY_UUID):
            history = await workflow.execute_activity_method(
                HistoryActivities.device_history, ask, **options)
            previous = _told(wf, history)
        else:
            previous = await workflow.execute_activity_method(
                HistoryActivities.previous_incidents, ask, **options)
    except ActivityError as err:  # visibility down: the incident goes on as classified
        wf.note("classify", f"repeat-offender check skipped: visibility did not answer ({err.cause or err})")
        return
    wf.state.previous_incidents = [f"{p.workflow_id}@{p.run_id}" for p in previous]
    count = len(previous) + 1
    window = _human(rule.window_s)
    if count < rule.incidents:
        if previous:
            wf.note("classify", f"{len(previous)} earlier incident(s) of this device within {window}; "
                                f"a repeat offender at {rule.incidents}")
        return
    wf.state.repeat_offender = True
    wf.state.permanence = Permanence.PERMANENT
    started = ", ".join(p.started.strftime("%Y-%m-%d %H:%M:%S") for p in previous)
    why = f"repeat offender: {count} incidents within {window} (policy: {rule.incidents}); earlier ones began {started}"
    wf.state.why = f"{wf.state.why}; {why}" if wf.state.why else why
    wf.note("classify", f"{why}: treated as a permanent failure (NoExecute taint, no in-place restart, ticket)")
    wf.refresh_details()


def _history_options(device: str, window_s: float) -> dict[str, Any]:
    return {"start_to_close_timeout": timedelta(seconds=30),
            "retry_policy": RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=10)),
            "summary": f"earlier incidents of {device} within {window_s:g}s",
            "priority": URGENT}


def _told(wf: IncidentContext, history: DeviceHistory) -> list[PreviousIncident]:
    """Record the GPU's UUID on the incident (so the GPU's next incident finds this one) and say which
    earlier incidents were another name's or another GPU's."""
    if history.unread:
        wf.note("classify", f"the GPU's UUID was not read ({history.unread}): its earlier incidents counted by slot")
    if history.uuid is None:
        return history.previous
    wf.upsert(search.DEVICE_UUIDS, [history.uuid])
    elsewhere = [f"{p.device}" for p in history.previous if p.device]
    if elsewhere:
        wf.note("classify", f"GPU {history.uuid} had incident(s) under another name too: {', '.join(elsewhere)}")
    if history.other_gpu:
        wf.note("classify", f"{history.other_gpu} earlier incident(s) of this slot not counted: another GPU "
                            f"was in it then (now {history.uuid})")
    return history.previous


def ladder(wf: IncidentContext, rungs: Sequence[LadderRung]) -> list[LadderRung]:
    """The rungs to climb: a repeat offender gets no in-place restart (its device is a lemon)."""
    if not wf.state.repeat_offender:
        return list(rungs)
    kept = [r for r in rungs if r.action != "in_place_restart"]
    if len(kept) != len(rungs):
        wf.note("recover", "repeat offender: in-place restart left out of the ladder")
    return kept


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
