"""Alertmanager webhook payloads into health events: mapping, skips and refusals."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from podmedic.domain.classify import classify
from podmedic.domain.maintenance import MaintenanceNotice
from podmedic.domain.models import FailureMode, Health, Permanence
from podmedic.domain.policy_file import load_policy
from tests.ingest_alertmanager.payloads import TEMPERATURE, TEMPERATURE_RESOLVED, XID_79, alert, payload
from workers.ingest.errors import EventError
from workers.ingest.http.alertmanager import alerts_to_observations
from workers.ingest.http.alertmanager_mapping import AlertmanagerMapping, AlertRule, MaintenanceRule

NOW = dt.datetime(2025, 3, 14, 10, 0, tzinfo=dt.UTC)
DEFAULT = AlertmanagerMapping()
NVIDIA = load_policy(None).for_driver("gpu.nvidia.com")


def refusal(body: object) -> list[tuple[str, str]]:
    with pytest.raises(EventError) as caught:
        alerts_to_observations(body, DEFAULT, NOW)
    return caught.value.problems


def test_xid_alert_opens_a_permanent_device_failure() -> None:
    result = alerts_to_observations(payload(XID_79), DEFAULT, NOW)
    assert result.skipped == []
    [event] = result.events
    assert event.device.resource_id == "gpu.nvidia.com/gpu-node-07/gpu-3"
    assert (event.health, event.code, event.node, event.source) == (Health.UNHEALTHY, 79, "gpu-node-07", "alertmanager")
    assert event.event_id == "alertmanager/4f2a9c1e0b7d3e55/firing/2025-03-14T09:26:53.589Z"
    assert event.observed_at == dt.datetime(2025, 3, 14, 9, 26, 53, 589000, tzinfo=dt.UTC)
    assert "GPU-5b0c1f7e" in event.message and "XID 79" in event.message
    verdict = classify(event, NVIDIA)
    assert (verdict.failure_mode, verdict.permanence, verdict.actionable) == (
        FailureMode.DEVICE_FAILED, Permanence.PERMANENT, True)


def test_xid_code_from_annotation_value_when_no_label() -> None:
    body = payload(alert("GPUXidError", annotations={"value": "31"}))
    [event] = alerts_to_observations(body, DEFAULT, NOW).events
    assert event.code == 31
    assert classify(event, NVIDIA).failure_mode is FailureMode.CONTAINER_CODE


def test_temperature_alert_feeds_the_metric_and_is_degraded() -> None:
    [event] = alerts_to_observations(payload(TEMPERATURE), DEFAULT, NOW).events
    assert event.device.device == "gpu-0" and event.metrics == {"temperature_c": 93.0} and event.code is None
    verdict = classify(event, NVIDIA)
    assert verdict.failure_mode is FailureMode.DEVICE_DEGRADED and verdict.actionable


def test_resolved_alert_is_healthy_at_ends_at() -> None:
    [event] = alerts_to_observations(payload(TEMPERATURE_RESOLVED), DEFAULT, NOW).events
    assert event.health is Health.HEALTHY and event.metrics == {} and event.code is None
    assert event.observed_at == dt.datetime(2025, 3, 14, 9, 41, 53, 589000, tzinfo=dt.UTC)
    assert event.event_id == "alertmanager/9e1d2c3b4a5f6071/resolved/2025-03-14T09:26:53.589Z"


def test_resolved_without_ends_at_uses_arrival_time() -> None:
    body = payload(alert("GPUXidError", status="resolved"))
    del body["alerts"][0]["endsAt"]
    [event] = alerts_to_observations(body, DEFAULT, NOW).events
    assert event.health is Health.HEALTHY and event.observed_at == NOW


def test_repeated_notification_keeps_the_event_id() -> None:
    first = alerts_to_observations(payload(XID_79), DEFAULT, NOW).events[0]
    again = alerts_to_observations(payload(XID_79), DEFAULT, NOW + dt.timedelta(hours=4)).events[0]
    assert first.event_id == again.event_id


def test_a_group_keeps_mappable_alerts_and_reports_the_rest() -> None:
    not_gpu = alert("KubeNodeNotReady", labels={"gpu": ""}, fingerprint="aa")
    not_gpu["labels"].pop("gpu")
    no_node = alert("GPUXidError", fingerprint="bb")
    for name in ("Hostname", "instance"):
        no_node["labels"].pop(name)
    result = alerts_to_observations(payload(not_gpu, XID_79, no_node, TEMPERATURE), DEFAULT, NOW)
    assert [e.device.device for e in result.events] == ["gpu-3", "gpu-0"]
    assert [where for where, _ in result.skipped] == ["alerts[0]", "alerts[2]"]
    assert "label gpu is missing" in result.skipped[0][1] and "KubeNodeNotReady" in result.skipped[0][1]
    assert "no node label" in result.skipped[1][1]


@pytest.mark.parametrize(("instance", "node"), [
    ("10.42.7.19:9400", "10.42.7.19"), ("gpu-node-1", "gpu-node-1"), ("gpu-node-1.example:9400", "gpu-node-1.example"),
])
def test_node_from_instance_strips_the_port(instance: str, node: str) -> None:
    body = payload(alert("GPUXidError", labels={"instance": instance}))
    body["alerts"][0]["labels"].pop("Hostname")
    [event] = alerts_to_observations(body, DEFAULT, NOW).events
    assert event.node == node and event.device.pool == node


@pytest.mark.parametrize("instance", ["[fd00::7]:9400", "fd00::7"])
def test_an_ipv6_instance_names_no_dra_pool_and_is_skipped_with_why(instance: str) -> None:
    # A DRA pool name is DNS subdomains joined by '/' (pkg/apis/resource/validation/validation.go,
    # validatePoolName): "fd00::7" cannot be one, so the default {node} pool template names no device.
    body = payload(alert("GPUXidError", labels={"instance": instance}))
    body["alerts"][0]["labels"].pop("Hostname")
    result = alerts_to_observations(body, DEFAULT, NOW)
    assert result.events == [] and "pool" in result.skipped[0][1]


def test_node_label_order_prefers_hostname_then_kubernetes_node() -> None:
    body = payload(alert("GPUXidError", labels={"kubernetes_node": "k8s-node", "node": "other"}))
    assert alerts_to_observations(body, DEFAULT, NOW).events[0].node == "gpu-node-07"
    body["alerts"][0]["labels"].pop("Hostname")
    assert alerts_to_observations(body, DEFAULT, NOW).events[0].node == "k8s-node"


UUID = "gpu-5b0c1f7e-8d2a-4c55-9c1e-2f1a7b3c9d10"


def test_mapping_overrides() -> None:
    mapping = AlertmanagerMapping.model_validate({
        "node_labels": ["kubernetes_node"],
        "driver": "gpu.example.com",
        "pool_template": "{node}-{job}",
        "device_template": "{uuid}",  # a DRA device name is a DNS label: dcgm's UUID label, lowercased upstream
        "rules": {"MyGpuBroken": {"health": "Unknown", "reason": "custom", "code_from": ["annotation:code"]},
                  "MyGpuSlow": {"metric": "throttle_s", "value_from": ["label:seconds"]}},
        "default_rule": None,
        "ignore": ["GPUXidError"],
    })
    body = payload(
        alert("MyGpuBroken", labels={"kubernetes_node": "kn", "podmedic_driver": "gpu.other.io", "uuid": UUID},
              annotations={"code": "12"}),
        alert("MyGpuSlow", labels={"kubernetes_node": "kn", "seconds": "400", "uuid": UUID}),
        alert("GPUXidError", labels={"kubernetes_node": "kn"}),
        alert("GPUHighTemperature", labels={"kubernetes_node": "kn"}),
    )
    result = alerts_to_observations(body, mapping, NOW)
    broken, slow = result.events
    assert broken.device.resource_id == f"gpu.other.io/kn-nvidia-dcgm-exporter/{UUID}"
    assert (broken.health, broken.reason, broken.code) == (Health.UNKNOWN, "custom", 12)
    assert slow.device.driver == "gpu.example.com" and slow.metrics == {"throttle_s": 400.0}
    assert slow.reason == "MyGpuSlow"
    assert [why.split(":")[0] for _, why in result.skipped] == ["GPUXidError", "GPUHighTemperature"]
    assert "ignored" in result.skipped[0][1] and "default_rule is null" in result.skipped[1][1]


def test_fixed_code_rule() -> None:
    [event] = alerts_to_observations(payload(alert("GPUFallenOffBus")), DEFAULT, NOW).events
    assert (event.code, event.reason) == (79, "fallen-off-bus")


@pytest.mark.parametrize(("name", "labels", "annotations", "why"), [
    ("GPUXidError", {"xid": "seventy-nine"}, {}, "label:xid 'seventy-nine' is not a number"),
    ("GPUXidError", {"xid": "79.5"}, {}, "is not an integer code"),
    ("GPUHighTemperature", {}, {"summary": "hot"}, "feeds temperature_c but none of annotation:value is set"),
    ("GPUHighTemperature", {}, {"value": "NaN"}, "is not a finite number"),
    ("GPUHighTemperature", {}, {"value": "hot"}, "is not a number"),
    ("GPUXidError", {"gpu": "9" * 200}, {}, "labels do not make a device name"),
])
def test_well_formed_alerts_that_cannot_map_are_skipped(
    name: str, labels: dict[str, str], annotations: dict[str, str], why: str
) -> None:
    result = alerts_to_observations(payload(alert(name, labels=labels, annotations=annotations), XID_79), DEFAULT, NOW)
    assert len(result.events) == 1  # the mappable neighbour survives
    [(where, reason)] = result.skipped
    assert where == "alerts[0]" and why in reason


def test_resolved_alert_needs_no_value() -> None:
    body = payload(alert("GPUHighTemperature", status="resolved", annotations={}, ends="2025-03-14T10:00:00Z"))
    assert alerts_to_observations(body, DEFAULT, NOW).events[0].health is Health.HEALTHY


@pytest.mark.parametrize(("field", "value", "why"), [
    ("pool_template", "{node.__class__}", "must be a plain label name"),
    ("device_template", "gpu-{0}", "must be a plain label name"),
    ("device_template", "gpu-{gpu!r}", "must be a plain label name"),
    ("device_template", "gpu-{", "is not a valid template"),
    ("rules", {"X": {"code_from": ["labels:xid"]}}, "is not `label:<name>` or `annotation:<name>`"),
    ("rules", {"X": {"health": "Healthy"}}, "Unhealthy"),
    ("colour", "blue", "Extra inputs are not permitted"),
])
def test_bad_mapping_is_refused(field: str, value: object, why: str) -> None:
    with pytest.raises(ValidationError) as caught:
        AlertmanagerMapping.model_validate({field: value})
    assert why in str(caught.value)


def _mutated(path: list[str | int], value: object, delete: bool = False) -> dict[str, Any]:
    body = payload(XID_79, TEMPERATURE, alert("GPUXidError", fingerprint="c3"), TEMPERATURE_RESOLVED)
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


@pytest.mark.parametrize(("path", "value", "delete", "where", "what"), [
    (["version"], None, True, "version", "Field required"),
    (["version"], "3", False, "version", "'4'"),
    (["version"], 4, False, "version", "'4'"),
    (["status"], "pending", False, "status", "'firing' or 'resolved'"),
    (["alerts"], {"0": {}}, False, "alerts", "valid list"),
    (["alerts"], None, True, "alerts", "Field required"),
    (["alerts", 1], "GPUXidError", False, "alerts[1]", "valid dictionary"),
    (["alerts", 3, "status"], "pending", False, "alerts[3].status", "'firing' or 'resolved'"),
    (["alerts", 3, "labels", "gpu"], 3, False, "alerts[3].labels.gpu", "valid string"),
    (["alerts", 2, "labels"], ["gpu"], False, "alerts[2].labels", "valid dictionary"),
    (["alerts", 0, "annotations"], None, True, "alerts[0].annotations", "Field required"),
    (["alerts", 0, "annotations", "value"], 79, False, "alerts[0].annotations.value", "valid string"),
    (["alerts", 1, "startsAt"], None, True, "alerts[1].startsAt", "Field required"),
    (["alerts", 1, "startsAt"], 1741944413, False, "alerts[1].startsAt", "valid string"),
    (["alerts", 1, "startsAt"], "yesterday", False, "alerts[1].startsAt", "'yesterday' is not an RFC 3339 time"),
    (["alerts", 1, "startsAt"], "2025-03-14T09:26:53", False, "alerts[1].startsAt", "is not an RFC 3339 time"),
    (["alerts", 3, "endsAt"], "2025-13-01T00:00:00Z", False, "alerts[3].endsAt", "is not an RFC 3339 time"),
    (["alerts", 2, "fingerprint"], "", False, "alerts[2].fingerprint", "at least 1 character"),
    (["alerts", 2, "fingerprint"], None, True, "alerts[2].fingerprint", "Field required"),
])
def test_malformed_payload_names_the_field(
    path: list[str | int], value: object, delete: bool, where: str, what: str
) -> None:
    problems = refusal(_mutated(path, value, delete))
    assert any(w == where and what in m for w, m in problems), problems


@pytest.mark.parametrize("body", [None, [], "alerts", 4, True])
def test_body_that_is_not_an_object(body: object) -> None:
    [(where, what)] = refusal(body)
    assert where == "(body)" and "Alertmanager webhook object" in what


def test_every_problem_of_a_payload_is_reported() -> None:
    body = _mutated(["alerts", 1, "labels", "gpu"], 1)
    body["alerts"][3]["fingerprint"] = ""
    wheres = {where for where, _ in refusal(body)}
    assert wheres == {"alerts[1].labels.gpu", "alerts[3].fingerprint"}


def test_rule_defaults_are_documented_defaults() -> None:
    assert AlertRule().health == "Unhealthy" and AlertRule().value_from == ["annotation:value"]
    assert DEFAULT.device_template == "gpu-{gpu}" and DEFAULT.driver == "gpu.nvidia.com"


def test_a_maintenance_alert_announces_the_nodes_deadline_and_its_resolution_withdraws_it() -> None:
    # Alertmanager's webhook (version 4): the alert's annotations hold what its rule rendered; the node is
    # read from the same labels as a device alert's (here dcgm-exporter's Hostname).
    firing = alert("NodeMaintenanceScheduled", annotations={"deadline": "2026-12-01T12:00:00Z"})
    [notice] = alerts_to_observations(payload(firing), DEFAULT, NOW).events
    assert isinstance(notice, MaintenanceNotice), notice
    assert (notice.node, notice.deadline) == ("gpu-node-07", dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC))
    assert notice.source == "Alertmanager alert NodeMaintenanceScheduled" and not notice.problem
    in_seconds = alert("NodeMaintenanceScheduled", annotations={"deadline": "1796126400"})  # the same time
    [same] = alerts_to_observations(payload(in_seconds), DEFAULT, NOW).events
    assert same.event_id == notice.event_id == "maintenance/gpu-node-07@1796126400"
    resolved = alert("NodeMaintenanceScheduled", "resolved", annotations={}, ends="2026-12-01T12:30:00Z")
    [gone] = alerts_to_observations(payload(resolved), DEFAULT, NOW).events
    assert isinstance(gone, MaintenanceNotice) and gone.deadline is None and not gone.problem


def test_a_maintenance_alert_whose_deadline_cannot_be_read_is_delivered_saying_why() -> None:
    # As with GKE's label: not for podmedic to correct, and not to be dropped: the incident says it.
    cases = (({"deadline": "next tuesday"}, "annotation:deadline 'next tuesday' is neither"),
             ({"deadline": "2026-12-01T12:00:00"}, "has no offset"),
             ({}, "none of annotation:deadline, label:deadline is set"))
    for notes, why in cases:
        [notice] = alerts_to_observations(payload(alert("NodeMaintenanceScheduled", annotations=notes)),
                                          DEFAULT, NOW).events
        assert isinstance(notice, MaintenanceNotice) and notice.deadline is None, notice
        assert why in notice.problem and "gpu-node-07" in notice.problem, notice.problem


def test_the_maintenance_alertnames_and_where_their_deadline_is_are_settings() -> None:
    mapping = AlertmanagerMapping(maintenance={"AzureScheduledEvent": MaintenanceRule(
        deadline_from=["label:not_before"])})
    body = payload(alert("AzureScheduledEvent", labels={"not_before": "1796126400"}),
                   alert("NodeMaintenanceScheduled", annotations={"deadline": "1796126400"}))
    notice, event = alerts_to_observations(body, mapping, NOW).events
    assert isinstance(notice, MaintenanceNotice) and notice.deadline is not None
    assert not isinstance(event, MaintenanceNotice), "an alertname no longer listed is a device alert again"
    with pytest.raises(ValidationError, match="is not `label:<name>` or `annotation:<name>`"):
        MaintenanceRule(deadline_from=["deadline"])
