"""The spans and metrics of one incident: ingest HTTP -> signal-with-start -> workflow -> activities."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.trace import ReadableSpan

from podmedic.domain.models import Outcome
from podmedic.telemetry import set_guard_state
from podmedic.telemetry.metrics import metrics
from tests.telemetry.conftest import Run

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _spans(run: Run) -> Sequence[ReadableSpan]:
    return run.spans.get_finished_spans()


def _deliveries(run: Run) -> list[ReadableSpan]:
    return sorted((s for s in _spans(run) if s.name == "podmedic.ingest.deliver"), key=lambda s: s.start_time or 0)


def _points(run: Run, name: str) -> list[Any]:
    data = run.reader.get_metrics_data()
    assert data is not None
    return [point for rm in data.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics
            if metric.name == name for point in metric.data.data_points]


async def test_the_incident_ran(run: Run) -> None:
    assert run.statuses == [202, 202, 415]
    assert run.outcome.outcome is Outcome.RECOVERED_IN_PLACE, run.outcome.explanation


async def test_one_trace_from_ingest_through_the_workflow_and_every_activity(run: Run) -> None:
    opener = _deliveries(run)[0]
    assert opener.parent is None  # the incident's trace starts at the ingest
    driver = run.resource_id.split("/")[0]
    assert opener.attributes is not None
    assert opener.attributes["podmedic.device"] == run.resource_id
    assert opener.attributes["podmedic.driver"] == driver
    assert opener.attributes["podmedic.node"] == run.node
    trace_id = opener.context.trace_id if opener.context else 0
    same_trace = [s for s in _spans(run) if s.context and s.context.trace_id == trace_id]
    names = {s.name for s in same_trace}
    assert "StartWorkflow:DeviceIncident" in names or "SignalWithStartWorkflow:DeviceIncident" in names, names
    assert "RunWorkflow:DeviceIncident" in names, names
    for activity in ("discover_device", "request_checkpoints", "taint_device", "restart_in_place", "remove_taint"):
        assert f"RunActivity:{activity}" in names, (activity, sorted(names))
    activities = [s for s in same_trace if s.name.startswith("RunActivity:")]
    assert all(s.attributes and s.attributes.get("podmedic.driver") == driver for s in activities)
    assert all(s.attributes and s.attributes.get("podmedic.device") == run.resource_id for s in activities)
    assert any(s.attributes and s.attributes.get("podmedic.node") == run.node for s in activities)
    workflow = next(s for s in same_trace if s.name == "RunWorkflow:DeviceIncident")
    assert workflow.attributes and workflow.attributes["podmedic.device"] == run.resource_id


async def test_a_repeat_links_to_the_incident_trace(run: Run) -> None:
    opener, repeat = _deliveries(run)[:2]
    assert repeat.context and opener.context and repeat.context.trace_id != opener.context.trace_id
    assert repeat.attributes and repeat.attributes.get("podmedic.repeat") is True
    assert any(link.context.span_id == opener.context.span_id for link in repeat.links)
    # Inside the incident's trace, the SDK's signal span links back to the repeat's trace.
    signals = [s for s in _spans(run) if s.name == "HandleSignal:health_event"
               and s.context and s.context.trace_id == opener.context.trace_id]
    assert len(signals) == 2
    assert any(link.context.trace_id == repeat.context.trace_id for s in signals for link in s.links)


async def test_each_delivery_links_to_its_http_request(run: Run) -> None:
    requests = {s.context.span_id: s for s in _spans(run) if s.name.startswith("podmedic.ingest.http") and s.context}
    assert len(requests) == 3
    for delivery in _deliveries(run):
        assert delivery.links and delivery.links[0].context.span_id in requests


async def test_incident_metrics(run: Run) -> None:
    driver = run.resource_id.split("/")[0]
    accepted = [p for p in _points(run, "podmedic_ingest_events") if p.attributes["outcome"] == "accepted"]
    assert sum(p.value for p in accepted) == 2 and accepted[0].attributes["source"] == "http"
    rejected = _points(run, "podmedic_ingest_rejected")
    assert [(p.attributes["status"], p.value) for p in rejected] == [("415", 1)]
    actions = {(p.attributes["kind"], p.attributes["outcome"]): p.value for p in _points(run, "podmedic_actions")}
    assert actions[("taint_device", "succeeded")] == 1 and actions[("restart_in_place", "succeeded")] >= 1
    quarantine = [p for p in _points(run, "podmedic_time_to_quarantine") if p.attributes.get("driver") == driver]
    assert len(quarantine) == 1 and quarantine[0].count == 1 and 0 <= quarantine[0].sum < 30
    recover = [p for p in _points(run, "podmedic_time_to_recover") if p.attributes.get("driver") == driver]
    assert recover and recover[0].count == 1 and recover[0].sum >= quarantine[0].sum
    assert recover[0].attributes["action"] == "in_place_restart"
    closed = {p.attributes["outcome"]: p.value for p in _points(run, "podmedic_incidents_closed")}
    assert closed == {"recovered_in_place": 1}
    phases = {p.attributes["phase"] for p in _points(run, "podmedic_incident_phase_entries")}
    assert {"Discovering", "Tainting", "Recovering"} <= phases


async def test_open_incidents_gauge_follows_visibility(run: Run) -> None:
    driver = run.resource_id.split("/")[0]
    assert sum(n for (kind, d, _), n in run.open_while_running.items() if kind == "device" and d == driver) == 1
    assert sum(n for (kind, d, _), n in run.open_after.items() if kind == "device" and d == driver) == 0
    # Its age: since it opened (started after the events were posted), back to 0 once it closed.
    [age] = [a for (kind, d, _), a in run.ages_while_running.items() if kind == "device" and d == driver and a]
    assert 0 < age <= run.seconds_since_post + 1
    assert all(a == 0 for (kind, d, _), a in run.ages_after.items() if kind == "device" and d == driver)
    # The node's correlation watch stays open after the device incident: counted as kind "node".
    assert any(kind == "node" and n > 0 for (kind, _, _), n in run.open_after.items())


async def test_temporal_sdk_metrics_are_exported(run: Run) -> None:
    assert run.telemetry.bridge is not None and run.telemetry.bridge.updates > 0
    completed = _points(run, "temporal_workflow_completed")
    assert sum(p.value for p in completed) >= 1
    assert _points(run, "temporal_activity_execution_latency")


async def test_prometheus_endpoint_serves_podmedic_and_temporal_metrics(run: Run) -> None:
    assert run.telemetry.prometheus_url is not None
    with urllib.request.urlopen(run.telemetry.prometheus_url, timeout=5) as response:
        text = response.read().decode()
    for wanted in ('podmedic_ingest_events_total{', 'outcome="accepted"', "podmedic_actions_total{",
                   "podmedic_time_to_quarantine_seconds_bucket{", "podmedic_time_to_recover_seconds_count{",
                   "podmedic_incidents_open{", "podmedic_incidents_oldest_age_seconds{",
                   "podmedic_incidents_closed_total{",
                   "temporal_workflow_completed_total{"):
        assert wanted in text, wanted


MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "kustomize" / "monitoring"
METRIC = re.compile(r"\b((?:podmedic|temporal)_[a-z0-9_]+)\b")


def _queries() -> dict[str, str]:
    """Every PromQL expression of the PrometheusRule and the Grafana dashboard, by where it is."""
    found: dict[str, str] = {}
    rules = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    for group in rules["spec"]["groups"]:
        for rule in group["rules"]:
            found[f"alert {rule['alert']}"] = rule["expr"]
    dashboard = json.loads((MONITORING / "podmedic-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            found[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    return found


async def test_every_alert_and_dashboard_query_names_a_metric_the_endpoint_serves(run: Run) -> None:
    assert run.telemetry.prometheus_url is not None
    # This module's policy has no fleet guard; publish its gauges through the hook the ask_guard activity calls.
    set_guard_state("ok", devices_tainted=1, nodes_disrupted=1, limits=(50, 10))
    metrics().ingest_leader.set(1, {"lease": "default/podmedic-ingest"})  # what leader.py sets (no election here)
    with urllib.request.urlopen(run.telemetry.prometheus_url, timeout=5) as response:
        served = {line.split("{")[0].split(" ")[0] for line in response.read().decode().splitlines()
                  if line and not line.startswith("#")}
    missing = {where: sorted(set(METRIC.findall(expr)) - served) for where, expr in _queries().items()}
    assert not {k: v for k, v in missing.items() if v}, missing
    assert all(METRIC.findall(expr) for expr in _queries().values())
