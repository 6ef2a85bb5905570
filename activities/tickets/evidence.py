"""The evidence bundle every backend sends: one builder, rendered as JSON or as text.

The workflow hands over what it knows (health timeline, pods, actions, checkpoints), already
capped so history stays small; the activity adds what only the cluster and Temporal know:
the device's ResourceSlice attributes and the device's previous incidents.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio.client import Client

from podmedic.domain import search
from podmedic.domain.models import DeviceRef
from podmedic.kube.gateway import KubeGateway

MAX_PREVIOUS = 20
MAX_TEXT = 30_000  # Jira and ServiceNow refuse very long descriptions (Jira's limit is 32,767)


async def device_attributes(kube: KubeGateway, device: DeviceRef) -> dict[str, Any]:
    """The device's entry in its ResourceSlice: attributes, capacity and node (empty when not found)."""
    for rslice in await kube.aio.pool_slices(device.driver, device.pool):
        spec = rslice.get("spec") or {}
        for dev in spec.get("devices") or []:
            if dev.get("name") != device.device:
                continue
            attrs = {k: next(iter(v.values()), None) if isinstance(v, dict) else v
                     for k, v in (dev.get("attributes") or {}).items()}
            capacity = {k: (v or {}).get("value") if isinstance(v, dict) else v
                        for k, v in (dev.get("capacity") or {}).items()}
            return {"resource_slice": (rslice.get("metadata") or {}).get("name"), "node": spec.get("nodeName"),
                    "attributes": attrs, "capacity": capacity}
    return {}


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


async def previous_incidents(client: Client, workflow_id: str, current_run: str) -> list[dict[str, Any]]:
    """Earlier runs of the device's incident workflow (newest first): ids, outcomes, times, tickets."""
    found: list[dict[str, Any]] = []
    escaped = workflow_id.replace("'", "")
    async for wf in client.list_workflows(f"WorkflowId = '{escaped}'", limit=MAX_PREVIOUS + 1):
        if wf.run_id == current_run:
            continue
        attrs = wf.typed_search_attributes
        found.append({
            "run_id": wf.run_id,
            "status": wf.status.name if wf.status else None,
            "outcome": attrs.get(search.OUTCOME),
            "ticket": attrs.get(search.TICKET),
            "opened": _iso(wf.start_time),
            "closed": _iso(wf.close_time),
        })
    found.sort(key=lambda p: p["opened"] or "", reverse=True)
    return found[:MAX_PREVIOUS]


def bundle(known: dict[str, Any], attributes: dict[str, Any], previous: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole bundle: the workflow's part plus the device's slice entry and previous incidents.

    ``device`` stays the bare identity (driver, pool, device) that receivers may post back.
    """
    return {**known, "device_slice": attributes, "previous_incidents": previous}


def title(evidence: dict[str, Any]) -> str:
    """One line naming the device and what is wrong with it."""
    device = evidence.get("device") or {}
    rid = "/".join(str(device.get(k, "?")) for k in ("driver", "pool", "device"))
    mode = evidence.get("failure_mode") or "failure"
    node = evidence.get("node") or device.get("pool") or "?"
    return f"podmedic: {rid} on {node}: {evidence.get('permanence') or ''} {mode}".replace("  ", " ")


def _or_none(lines: list[str]) -> list[str]:
    return lines or ["  none"]


def _lines(evidence: dict[str, Any]) -> list[str]:
    slice_info = evidence.get("device_slice") or {}
    out = [title(evidence), "", f"Incident: {evidence.get('incident')} (run {evidence.get('run_id', '?')})",
           f"Classification: {evidence.get('classification', '')}"]
    if escalated := evidence.get("escalated"):
        out.append(f"New ticket: {escalated.get('why')}; the device's earlier ticket: "
                   f"{escalated.get('earlier_ticket') or 'none'}")
    if slice_info:
        out.append(f"Device attributes: {slice_info.get('attributes')} capacity: {slice_info.get('capacity')}")
    out += ["", "Health timeline:"]
    out += [f"  {e.get('at')} {e.get('health')} code={e.get('code')} {e.get('reason', '')}: {e.get('message', '')}"
            for e in evidence.get("events") or []]
    out += ["", "Pods affected:", *(_or_none([f"  {p}" for p in evidence.get("pods") or []]))]
    out += ["", f"Checkpoints: {', '.join(evidence.get('checkpoint_ids') or []) or 'none'}",
            f"DeviceTaintRule: {evidence.get('taint_rule')}", "", "Actions:"]
    out += [f"  {a.get('at')} [{a.get('step')}] {a.get('message')}" for a in evidence.get("actions") or []]
    out += ["", "Previous incidents of this device:"]
    out += _or_none([f"  {p['opened']} {p['status']} {p.get('outcome') or ''} ticket={p.get('ticket') or '-'} "
                     f"run={p['run_id']}" for p in evidence.get("previous_incidents") or []])
    return out


def text(evidence: dict[str, Any]) -> str:
    """The bundle as plain text for a ticket's description, cut to what trackers accept."""
    body = "\n".join(_lines(evidence))
    return body if len(body) <= MAX_TEXT else body[: MAX_TEXT - 20] + "\n... (truncated)"
