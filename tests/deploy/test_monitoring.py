"""deploy/kustomize/monitoring: the Prometheus operator's PodMonitor and PrometheusRule and the Grafana
dashboard, checked against the base they watch. That every query names a metric podmedic really
exports is checked against a live scrape in tests/telemetry/test_incident_telemetry.py.

Shapes: monitoring.coreos.com/v1 PodMonitor (``spec.selector``, ``spec.podMetricsEndpoints[].port``
names a container port) and PrometheusRule (``spec.groups[].rules[]`` with ``alert``/``expr``/``for``),
as the Prometheus operator's API reference defines them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import ROOT, kustomize

Obj = dict[str, Any]
MONITORING = ROOT / "deploy" / "kustomize" / "monitoring"
ALERTS = {"PodmedicGuardTripped", "PodmedicApprovalWaiting", "PodmedicDeviceQuarantinedLong",
          "PodmedicIngestRejecting", "PodmedicIngestLeader", "PodmedicTaskQueueBackingUp", "PodmedicTicketsFailing"}


@pytest.fixture(scope="module")
def monitoring() -> dict[str, Obj]:
    return {d["kind"]: d for d in yaml.safe_load_all(kustomize(MONITORING)) if d}


@pytest.fixture(scope="module")
def base() -> list[Obj]:
    return [d for d in yaml.safe_load_all(kustomize(ROOT / "deploy" / "kustomize" / "base")) if d]


def _deployment(base: list[Obj], name: str) -> Obj:
    return next(d for d in base if d["kind"] == "Deployment" and d["metadata"]["name"] == name)


def test_the_podmonitor_scrapes_the_worker_and_the_ingest_on_their_metrics_port(monitoring: dict[str, Obj],
                                                                               base: list[Obj]) -> None:
    monitor = monitoring["PodMonitor"]["spec"]
    [expression] = monitor["selector"]["matchExpressions"]
    config = next(d for d in base if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("podmedic-config"))
    port = int(config["data"]["PODMEDIC_METRICS_PORT"])
    for name in ("podmedic-worker", "podmedic-ingest"):
        template = _deployment(base, name)["spec"]["template"]
        assert template["metadata"]["labels"][expression["key"]] in expression["values"]
        ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert [e["port"] for e in monitor["podMetricsEndpoints"]] == ["metrics"] and ports["metrics"] == port
        policy = next(d for d in base if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == name)
        allowed = {p["port"] for rule in policy["spec"]["ingress"] for p in rule.get("ports", [])}
        assert port in allowed, f"{name}'s NetworkPolicy does not let Prometheus scrape port {port}"
    assert monitor["namespaceSelector"]["matchNames"] == [config["metadata"]["namespace"]]


def test_the_rules_alert_on_what_on_call_needs(monitoring: dict[str, Obj]) -> None:
    rules = [r for g in monitoring["PrometheusRule"]["spec"]["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} == ALERTS
    for rule in rules:
        assert rule["expr"].strip() and rule["labels"]["severity"] in ("critical", "warning")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_the_dashboard_shows_incidents_quarantine_guard_ingest_and_tickets(monitoring: dict[str, Obj]) -> None:
    config = monitoring["ConfigMap"]
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config["data"]["podmedic-dashboard.json"])
    queries = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in dashboard["panels"]}
    wanted = {"podmedic_incidents_open": "phase", "podmedic_incidents_closed_total": "outcome",
              "podmedic_time_to_quarantine_seconds_bucket": "", "podmedic_guard_devices_limit": "",
              "podmedic_ingest_events_total": "", "podmedic_ingest_rejected_total": "",
              'kind="file_ticket"': ""}
    for metric, by in wanted.items():
        assert any(metric in q and by in q for q in queries.values()), f"no panel shows {metric} {by}"
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
