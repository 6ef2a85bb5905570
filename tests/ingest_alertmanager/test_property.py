"""Generated webhook payloads, well-formed and not: the mapping never fails any other way
than an ``EventError`` that names where and why, and every event it makes is valid."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as outcome
from hypothesis import strategies as st

from podmedic.domain.models import DeviceHealthEvent, Health
from tests.fuzzkit import damage, json_values
from workers.ingest.errors import EventError
from workers.ingest.http.alertmanager import alerts_to_observations
from workers.ingest.http.alertmanager_mapping import AlertmanagerMapping

NOW = dt.datetime(2025, 3, 14, 10, 0, tzinfo=dt.UTC)
MAPPINGS = [
    AlertmanagerMapping(),
    AlertmanagerMapping(device_template="{UUID}", pool_template="{node}-{job}", default_rule=None,
                        ignore=["GPUThrottling"]),
]
NAMES = ["GPUXidError", "GPUHighTemperature", "GPUFallenOffBus", "GPUEccCorrectableHigh", "GPUThrottling",
         "KubeNodeNotReady", "Custom"]
ROOTS = ("(body)", "version", "status", "alerts")

numbers = st.sampled_from(["79", "31", "93", "0", "-1", "1e3", "79.0", "NaN", "inf", "x", "", " 48 "])
times = st.sampled_from(["2025-03-14T09:26:53.589Z", "2025-03-14T09:26:53.123456789+02:00", "0001-01-01T00:00:00Z"])
# Malformations come only from the damage step, so most payloads reach the mapping itself.
damaged_values = json_values | st.sampled_from(
    ["2025-03-14T09:26:53", "2025-02-30T00:00:00Z", "soon", "1741944413", ""])
label_values = {
    "alertname": st.sampled_from(NAMES), "gpu": st.sampled_from(["0", "3", "7"] * 3 + ["", "x" * 130]),
    "Hostname": st.sampled_from(["gpu-node-07"] * 4 + ["", " "]),
    "instance": st.sampled_from(["10.0.0.5:9400", "[::1]:1"]),
    "xid": numbers, "err_code": numbers, "UUID": st.sampled_from(["GPU-5b0c", ""]), "job": st.just("dcgm"),
    "podmedic_driver": st.sampled_from(["gpu.amd.com", ""]),
}


@st.composite
def alerts(draw: st.DrawFn) -> dict[str, Any]:
    always = {"alertname", "gpu", "Hostname", "UUID", "job"}
    labels = {k: draw(v) for k, v in label_values.items() if k in always or draw(st.booleans())}
    for name in draw(st.lists(st.sampled_from(sorted(always)), max_size=2)):
        labels.pop(name, None)
    annotations = draw(st.dictionaries(st.sampled_from(["value", "summary", "xid", "description"]), numbers))
    out: dict[str, Any] = {"status": draw(st.sampled_from(["firing", "resolved"])), "labels": labels,
                           "annotations": annotations, "startsAt": draw(times),
                           "fingerprint": draw(st.sampled_from(["4f2a9c1e", "b71c", "a"]))}
    if draw(st.booleans()):
        out["endsAt"] = draw(times)
    return out


@st.composite
def payloads(draw: st.DrawFn) -> object:
    body: dict[str, Any] = {"version": "4", "status": draw(st.sampled_from(["firing", "resolved"])),
                            "receiver": "podmedic", "alerts": draw(st.lists(alerts(), max_size=5))}
    damage(draw, body, damaged_values)
    return body if draw(st.integers(0, 9)) else draw(json_values)


def _check(body: object, mapping: AlertmanagerMapping) -> None:
    try:
        result = alerts_to_observations(body, mapping, NOW)
    except EventError as refusal:
        outcome("refused")
        assert refusal.problems
        for where, what in refusal.problems:
            assert where.startswith(ROOTS), where
            assert what.strip(), where
        return
    assert isinstance(body, dict)
    outcome(f"accepted: events {bool(result.events)}, skipped {bool(result.skipped)}")
    assert len(result.events) + len(result.skipped) == len(body["alerts"])
    for event in result.events:
        again = DeviceHealthEvent.model_validate(event.model_dump())
        assert again == event and event.observed_at.tzinfo is not None and event.source == "alertmanager"
        assert event.event_id.startswith("alertmanager/")
        if event.health is Health.HEALTHY:
            assert event.code is None and not event.metrics
    for where, why in result.skipped:
        assert re.fullmatch(r"alerts\[\d+\]", where) and why.strip()


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=payloads(), which=st.integers(0, len(MAPPINGS) - 1))
def test_generated_payloads(body: object, which: int) -> None:
    _check(body, MAPPINGS[which])


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=payloads(), which=st.integers(0, len(MAPPINGS) - 1))
def test_generated_payloads_long(body: object, which: int) -> None:
    _check(body, MAPPINGS[which])
