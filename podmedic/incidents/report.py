"""``podmedic report``: an incident's post-mortem, from its durable Temporal history.

It holds the device's health when it failed (the detectors' words and what the cluster
showed), the pods, the classification, every action with its time and result, every
operator decision, and the outcome. Markdown for people, JSON for tools.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowExecutionStatus

from podmedic.domain import workflow_names as names
from podmedic.domain.incident import IncidentState
from podmedic.incidents.history import Action, Record, fetch_record


class Report(BaseModel):
    """The post-mortem of one incident run."""

    incident_id: str
    run_id: str
    workflow_type: str
    status: str
    opened_at: dt.datetime
    closed_at: dt.datetime | None
    duration_s: float | None
    summary: str
    device: dict[str, Any] | None = None
    policy_driver: str | None = None
    failure: dict[str, Any] | None = Field(
        None, description="The first non-Healthy health event that names a code (else the first non-Healthy one).")
    cluster_reading: dict[str, Any] | None = Field(None, description="Device health the cluster showed at discovery.")
    health_events: list[dict[str, Any]] = Field(default_factory=list)
    pods: list[dict[str, Any]] = Field(default_factory=list)
    outcome: dict[str, Any] | None = None
    actions: list[Action] = Field(default_factory=list)
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    timeline: list[dict[str, Any]] = Field(default_factory=list)
    ui_url: str = ""


def build(rec: Record, live: IncidentState | None = None, ui_url: str = "") -> Report:
    """Fold a history record (and, for a running incident, its live state) into a report."""
    inp = rec.input if isinstance(rec.input, dict) else {}
    result = rec.result if isinstance(rec.result, dict) else None
    discovery = next((a.result for a in rec.actions if a.name == "discover_device" and isinstance(a.result, dict)),
                     None)
    bad = [e for e in rec.health_events if e.get("health") != "Healthy"]
    # Pod status often says only Unhealthy; the XID then comes from another source (the node agent).
    failure = next((e for e in bad if e.get("code") is not None), bad[0] if bad else None)
    decisions = (result or {}).get("decisions") or ([d.model_dump(mode="json") for d in live.decisions] if live else [])
    timeline = (result or {}).get("timeline") or ([t.model_dump(mode="json") for t in live.timeline] if live else [])
    end = rec.closed_at
    return Report(
        incident_id=rec.workflow_id, run_id=rec.run_id, workflow_type=rec.workflow_type, status=rec.status,
        opened_at=rec.opened_at, closed_at=end,
        duration_s=(end - rec.opened_at).total_seconds() if end else None, summary=rec.summary,
        device=inp.get("device"), policy_driver=(inp.get("policy") or {}).get("driver"),
        failure=failure, cluster_reading=(discovery or {}).get("reading"), health_events=rec.health_events,
        pods=(discovery or {}).get("pods") or [], outcome=result or ({"outcome": None, "explanation": rec.failure}
                                                                     if rec.failure else None),
        actions=rec.actions, decisions=decisions, timeline=timeline, ui_url=ui_url,
    )


async def fetch_report(client: Client, workflow_id: str, run_id: str | None = None, ui_url: str = "") -> Report:
    """The report of one incident run (the latest unless ``run_id``)."""
    rec = await fetch_record(client, workflow_id, run_id)
    live = None
    if rec.status == "Running" and rec.workflow_type == names.DEVICE_INCIDENT:
        handle = client.get_workflow_handle(workflow_id, run_id=rec.run_id)
        if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            live = await handle.query("get_state", result_type=IncidentState, rpc_timeout=dt.timedelta(seconds=10))
    return build(rec, live, ui_url)


def _t(value: dt.datetime | str | None) -> str:
    if value is None:
        return "-"
    when = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(rep: Report) -> str:
    """The report for people."""
    out = rep.outcome or {}
    lines = [f"# Incident report: `{rep.incident_id}`", "",
             f"- **Run**: `{rep.run_id}` ({rep.workflow_type}), {rep.status}",
             f"- **Opened**: {_t(rep.opened_at)} · **closed**: {_t(rep.closed_at)}"
             + (f" · **duration**: {rep.duration_s:.1f}s" if rep.duration_s is not None else ""),
             f"- **Summary**: {rep.summary or '-'}"]
    if rep.device:
        lines.append(f"- **Device**: `{rep.device['driver']}/{rep.device['pool']}/{rep.device['device']}` "
                     f"(policy `{rep.policy_driver}`)")
    if out:
        lines.append(f"- **Outcome**: `{out.get('outcome')}` — {out.get('explanation', '')}")
        if out.get("failure_mode"):
            lines.append(f"- **Classification**: `{out['failure_mode']}`, {out.get('permanence')}")
        extras = [f"{k}: `{out[k]}`" for k in ("taint_rule", "ticket_id", "recovered_by") if out.get(k)]
        if out.get("checkpoint_ids"):
            extras.append(f"checkpoints: {', '.join(out['checkpoint_ids'])}")
        if extras:
            lines.append("- " + "; ".join(extras))
    if rep.ui_url:
        lines.append(f"- **Temporal UI**: {rep.ui_url}")
    lines += ["", "## Device health at the time of failure", ""]
    if rep.failure:
        f = rep.failure
        code = f" code {f['code']}" if f.get("code") is not None else ""
        lines.append(f"- **{f.get('health')}**{code} at {_t(f.get('observed_at'))} from `{f.get('source')}` "
                     f"on node `{f.get('node') or '-'}`: {f.get('reason', '')} {f.get('message', '')}".rstrip())
        if f.get("metrics"):
            lines.append("- Readings: " + ", ".join(f"{k}={v}" for k, v in sorted(f["metrics"].items())))
        if f.get("pod"):
            lines.append(f"- Reported by pod `{f['pod']['namespace']}/{f['pod']['name']}`")
    else:
        lines.append("- no failing health event recorded")
    if rep.cluster_reading:
        r = rep.cluster_reading
        lines.append(f"- Cluster at discovery: **{r.get('health')}** ({r.get('source') or '-'}): "
                     f"{r.get('message') or ''}")
    if len(rep.health_events) > 1:
        lines += ["", "| observed | health | code | source | message |", "|---|---|---|---|---|"]
        lines += [f"| {_t(e.get('observed_at'))} | {e.get('health')} | {e.get('code') or ''} "
                  f"| {_cell(e.get('source'))} | {_cell(e.get('message', ''))} |" for e in rep.health_events]
    if rep.pods:
        lines += ["", "## Pods", ""]
        lines += [f"- `{p['namespace']}/{p['name']}` uid `{p.get('uid', '')}` on `{p.get('node') or '-'}`"
                  + (f", job `{p['job']}`" if p.get("job") else "") for p in rep.pods]
    lines += ["", "## Actions", "", "| started | finished | kind | action | status | tries | detail |",
              "|---|---|---|---|---|---|---|"]
    for a in rep.actions:
        what = a.summary or a.name
        detail = a.detail or (a.by and f"by {a.by}") or ""
        lines.append(f"| {_t(a.at)} | {_t(a.finished_at)} | {a.kind} | {_cell(what)} | {a.status} | {a.attempts} "
                     f"| {_cell(detail)} |")
    if rep.decisions:
        lines += ["", "## Operator decisions", ""]
        lines += [f"- {_t(d.get('at'))} **{d.get('step')}** {d.get('decision')} by {d.get('by')}"
                  + (f": {d['note']}" if d.get("note") else "") for d in rep.decisions]
    if rep.timeline:
        lines += ["", "## Timeline", ""]
        lines += [f"- {_t(t.get('at'))} `{t.get('step')}` {t.get('message')}" for t in rep.timeline]
    return "\n".join(lines) + "\n"
