"""Finding, reading and steering incidents: what ``podmedic incidents`` does, minus printing.

Listing goes through Temporal visibility (the search attributes the workflows keep
current); reading a running incident goes through its ``get_state`` query, a closed one
through its result; steering goes through the workflow's validated updates.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain import search
from podmedic.domain import workflow_names as names
from podmedic.domain.incident import IncidentOutcome, IncidentState, OperatorAnswer
from podmedic.domain.policy import DriverPolicy
from podmedic.domain.policy_ref import POLICY_MEMO, unpack

KINDS = {"device": names.DEVICE_INCIDENT, "config": names.CONFIG_INCIDENT, "node": names.NODE_INCIDENT,
         "pod-device": names.UNRESOLVED_DEVICE, "pool": names.POOL_FENCE, "storm": names.STORM_TURNS,
         "workload": names.WORKLOAD_STALL, "maintenance": names.NODE_MAINTENANCE}
_SAFE = re.compile(r"^[A-Za-z0-9._/:@+-]*$")


class OperatorError(Exception):
    """What went wrong, for a person, and the exit code that says it (1 rejected, 2 not found/closed)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def incident_id(text: str) -> str:
    """Accept a workflow id or a bare ``driver/pool/device`` resource id."""
    kinds = ("device/", "config/", "node/", "pod-device/", "fleet/", "pool/", "storm/", "workload/", "maintenance/")
    if text.startswith(kinds) or text.count("/") != 2:
        return text
    return f"device/{text}"


def list_query(kind: str, *, driver: str | None = None, node: str | None = None, phase: str | None = None,
               namespace: str | None = None, job: str | None = None, pod: str | None = None,
               open_only: bool = False) -> str:
    """The visibility query for ``incidents list``; values are checked, never pasted blindly."""
    kinds = list(KINDS.values()) if kind == "all" else [KINDS[kind]]
    parts = ["(" + " OR ".join(f"WorkflowType = '{k}'" for k in kinds) + ")"]
    filters = ((search.DRIVER.name, "--driver", driver), (search.NODE.name, "--node", node),
               (search.PHASE.name, "--phase", phase), (search.NAMESPACE.name, "--namespace", namespace),
               (search.JOB.name, "--job", job), (search.PODS.name, "--pod", pod))
    for attribute, flag, value in filters:
        if value is None:
            continue
        if not _SAFE.match(value):
            raise OperatorError(f"{flag} {value!r}: only letters, digits and ._/:@+- are allowed", 2)
        parts.append(f"{attribute} = '{value}'")
    if open_only:
        parts.append("ExecutionStatus = 'Running'")
    return " AND ".join(parts)


class Row(BaseModel):
    """One incident in a listing."""

    id: str
    run_id: str
    type: str
    status: str
    started: dt.datetime
    closed: dt.datetime | None
    attributes: dict[str, Any]


def _row(wf: WorkflowExecution) -> Row:
    attrs: dict[str, Any] = {}
    for key in search.ALL_KEYS:
        value = wf.typed_search_attributes.get(key)
        if value is not None:
            attrs[key.name] = list(value) if isinstance(value, list | tuple) else value
    status = wf.status.name.title() if wf.status else "Unknown"
    return Row(id=wf.id, run_id=wf.run_id, type=wf.workflow_type, status=status, started=wf.start_time,
               closed=wf.close_time, attributes=attrs)


async def list_incidents(client: Client, query: str, limit: int) -> list[Row]:
    """Incidents matching ``query``, newest first."""
    return [_row(wf) async for wf in client.list_workflows(query, limit=limit)]


class Shown(BaseModel):
    """An incident as ``show`` prints it."""

    id: str
    run_id: str
    type: str
    status: str
    summary: str | None
    details: str | None
    state: IncidentState | None = None
    outcome: IncidentOutcome | None = None
    other: Any = None
    policy: DriverPolicy | None = None
    """The driver policy a device incident runs under (its memo; ``podmedic/domain/policy_ref.py``)."""


async def show(client: Client, wid: str, run_id: str | None = None) -> Shown:
    """The live state of a running incident, or the outcome of a closed one."""
    handle = client.get_workflow_handle(wid, run_id=run_id)
    try:
        desc = await handle.describe()
    except RPCError as err:
        raise _translate(err, wid) from err
    shown = Shown(id=desc.id, run_id=desc.run_id, type=desc.workflow_type,
                  status=desc.status.name.title() if desc.status else "Unknown",
                  summary=await desc.static_summary(), details=await desc.static_details())
    running = desc.status == WorkflowExecutionStatus.RUNNING
    if desc.workflow_type == KINDS["device"]:
        packed = await desc.memo_value(POLICY_MEMO, None, type_hint=bytes)
        with contextlib.suppress(ValueError):  # an incident opened before the memo carried the policy
            shown.policy = unpack(packed) if packed else None
        if running:
            shown.state = await handle.query("get_state", result_type=IncidentState,
                                             rpc_timeout=dt.timedelta(seconds=10))
        elif desc.status == WorkflowExecutionStatus.COMPLETED:
            typed = client.get_workflow_handle(wid, run_id=desc.run_id, result_type=IncidentOutcome)
            shown.outcome = await typed.result()
    elif running and desc.workflow_type in (KINDS["node"], KINDS["pool"], KINDS["storm"]):
        shown.other = await handle.query("get_state", rpc_timeout=dt.timedelta(seconds=10))
    elif running and desc.workflow_type in (KINDS["workload"], KINDS["maintenance"]):
        shown.other = await handle.query("get_timeline", rpc_timeout=dt.timedelta(seconds=10))
    elif desc.status == WorkflowExecutionStatus.COMPLETED:
        shown.other = await handle.result()
    return shown


async def steer(client: Client, wid: str, update: str, request: BaseModel) -> OperatorAnswer:
    """Run one of the incident's updates; a rejection becomes ``OperatorError`` with the reason."""
    handle = client.get_workflow_handle(wid)
    try:
        answer: OperatorAnswer = await handle.execute_update(update, request, result_type=OperatorAnswer)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        reason = getattr(cause, "message", None) or str(cause or err)
        raise OperatorError(f"rejected: {reason}", 1) from err
    except RPCError as err:
        raise _translate(err, wid) from err
    return answer


def _translate(err: RPCError, wid: str) -> OperatorError:
    if err.status == RPCStatusCode.NOT_FOUND:
        if "completed" in err.message:
            return OperatorError(f"incident {wid} is closed: {err.message}", 2)
        return OperatorError(f"no incident {wid}: {err.message}", 2)
    if "already completed" in err.message:
        return OperatorError(f"incident {wid} is closed", 2)
    return OperatorError(f"Temporal refused: {err.message}", 3)
