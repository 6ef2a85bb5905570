"""Readings over time into CloudEvents: what is reported, when, and in which shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from podmedic.domain.classify import classify
from podmedic.domain.models import FailureMode, Health, Permanence
from podmedic.domain.policy_file import load_policy
from tests.agent.fakes import GPUS, at, reading
from workers.agent.readings import XidEvent
from workers.agent.translate import AgentConfig, Translator
from workers.ingest.http.cloudevents import parse_batch

NVIDIA = load_policy(None).for_driver("gpu.nvidia.com")


def translator(**config: Any) -> Translator:
    return Translator(AgentConfig(node="gpu-node-07", **config), GPUS)


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["data"]["device"], e["data"]["health"], e["data"].get("reason", "")) for e in events]


def test_xid_is_unhealthy_with_the_code_and_passes_the_ingest_contract() -> None:
    t = translator()
    events = t.xids([XidEvent(1, 79, at(5))])
    [observation] = parse_batch(json.dumps(events).encode())
    assert observation.device.resource_id == "gpu.nvidia.com/gpu-node-07/gpu-1"
    assert (observation.health, observation.code, observation.reason, observation.node) == (
        Health.UNHEALTHY, 79, "xid", "gpu-node-07")
    assert observation.observed_at == at(5)
    assert GPUS[1].uuid in observation.message and "XID 79" in observation.message
    assert observation.event_id == f"ce/podmedic-agent/gpu-node-07/{events[0]['id']}"
    verdict = classify(observation, NVIDIA)
    assert (verdict.failure_mode, verdict.permanence) == (FailureMode.DEVICE_FAILED, Permanence.PERMANENT)


def test_xids_of_one_cycle_are_grouped_per_device_and_code() -> None:
    t = translator()
    events = t.xids([XidEvent(0, 13, at(1)), XidEvent(0, 13, at(2)), XidEvent(0, 31, at(2)), XidEvent(1, 13, at(3))])
    assert [(e["data"]["device"], e["data"]["code"]) for e in events] == [("gpu-0", 13), ("gpu-0", 31), ("gpu-1", 13)]
    assert "XID 13 (2 times)" in events[0]["data"]["message"]
    assert len({e["id"] for e in events}) == 3


def test_healthy_device_reports_nothing() -> None:
    t = translator()
    assert [t.reading(reading(s)) for s in range(0, 600, 10)] == [[]] * 60


def test_unsupported_readings_are_left_out() -> None:
    t = translator()
    bare = reading(0, ecc_corrected=None, ecc_uncorrected=None, retired_pages=None, row_remap_failure=None,
                   temperature_c=None, slowdown=None, nvlink_active=None, nvlink_errors=None)
    assert t.reading(bare) == []
    assert t.snapshot(bare)["data"].get("metrics") is None


def test_uncorrectable_ecc_rise_is_unhealthy_and_never_cleared_here() -> None:
    t = translator()
    assert t.reading(reading(0, ecc_uncorrected=2)) == []  # the count at start is the baseline
    events = t.reading(reading(10, ecc_uncorrected=3))
    assert summary(events) == [("gpu-0", "Unhealthy", "ecc-uncorrectable")]
    assert "from 2 to 3" in events[0]["data"]["message"]
    [observation] = parse_batch(json.dumps(events).encode())
    assert classify(observation, NVIDIA).failure_mode is FailureMode.DEVICE_FAILED
    assert t.reading(reading(20, ecc_uncorrected=3)) == []
    assert t.reading(reading(30, ecc_uncorrected=0)) == []  # reset: new baseline, still no Healthy


def test_temperature_degradation_is_rate_limited_and_recovery_reported_once() -> None:
    t = translator(report_interval_s=300)
    first = t.reading(reading(0, temperature_c=95.0))
    assert summary(first) == [("gpu-0", "Unhealthy", "degraded")]
    data = first[0]["data"]
    assert data["metrics"]["temperature_c"] == 95.0 and "temperature_c 95 > 90" in data["message"]
    [observation] = parse_batch(json.dumps(first).encode())
    verdict = classify(observation, NVIDIA)
    assert verdict.failure_mode is FailureMode.DEVICE_DEGRADED and verdict.actionable
    assert [t.reading(reading(s, temperature_c=96.0)) for s in (10, 150, 290)] == [[], [], []]
    assert summary(t.reading(reading(300, temperature_c=97.0))) == [("gpu-0", "Unhealthy", "degraded")]
    back = t.reading(reading(310, temperature_c=70.0))
    assert summary(back) == [("gpu-0", "Healthy", "recovered")]
    assert "cleared: degraded" in back[0]["data"]["message"]
    assert t.reading(reading(320, temperature_c=70.0)) == []
    # A new episode is reported at once, whatever the last report's time.
    assert summary(t.reading(reading(330, temperature_c=95.0))) == [("gpu-0", "Unhealthy", "degraded")]


def test_correctable_ecc_rate_counts_the_trailing_hour() -> None:
    t = translator()
    assert t.reading(reading(0, ecc_corrected=1000)) == []
    assert t.reading(reading(600, ecc_corrected=1050)) == []  # 50 in the first 10 minutes: 50/h so far
    events = t.reading(reading(1200, ecc_corrected=1120))  # 120 within the hour
    assert summary(events) == [("gpu-0", "Unhealthy", "degraded")]
    assert events[0]["data"]["metrics"]["ecc_correctable_per_hour"] == pytest.approx(120.0)
    # No new errors for more than an hour: the window slides past them.
    back = t.reading(reading(1200 + 3700, ecc_corrected=1120))
    assert summary(back) == [("gpu-0", "Healthy", "recovered")]
    assert back[0]["data"]["metrics"]["ecc_correctable_per_hour"] == 0.0


def test_counter_reset_restarts_the_rate() -> None:
    t = translator()
    t.reading(reading(0, ecc_corrected=500))
    assert t.reading(reading(60, ecc_corrected=3)) == []  # GPU reset: no negative rate, no report
    events = t.reading(reading(120, ecc_corrected=203))
    assert events[0]["data"]["metrics"]["ecc_correctable_per_hour"] == pytest.approx(200.0)


def test_throttle_is_the_continuous_slowdown_duration() -> None:
    t = translator()
    hot = ("hw_thermal",)
    assert [t.reading(reading(s, slowdown=hot)) for s in (0, 100, 300)] == [[], [], []]  # 300 s is not > 300
    events = t.reading(reading(301, slowdown=hot))
    assert events[0]["data"]["metrics"]["throttle_s"] == 301.0
    assert summary(t.reading(reading(310, slowdown=()))) == [("gpu-0", "Healthy", "recovered")]
    # A fresh slowdown starts counting from zero.
    assert t.reading(reading(320, slowdown=hot)) == [] and t.reading(reading(600, slowdown=hot)) == []


def test_nvlink_link_going_down_and_back() -> None:
    t = translator()
    assert t.reading(reading(0, nvlink_active=frozenset({0, 1, 2, 3}))) == []
    down = t.reading(reading(10, nvlink_active=frozenset({0, 1, 3})))
    assert summary(down) == [("gpu-0", "Unhealthy", "nvlink-down")]
    assert "links down: 2" in down[0]["data"]["message"]
    assert t.reading(reading(20, nvlink_active=frozenset({0, 1}))) == []  # still down: reported once
    assert summary(t.reading(reading(30))) == [("gpu-0", "Healthy", "recovered")]


def test_nvlink_error_rate() -> None:
    t = translator()
    t.reading(reading(0, nvlink_errors=10))
    events = t.reading(reading(60, nvlink_errors=70))
    assert events[0]["data"]["metrics"]["nvlink_errors_per_hour"] == pytest.approx(60.0)
    assert "nvlink_errors_per_hour 60 > 50" in events[0]["data"]["message"]


def test_healthy_waits_for_every_problem() -> None:
    t = translator()
    t.reading(reading(0))
    assert {r for _, _, r in summary(t.reading(reading(10, temperature_c=95.0, nvlink_active=frozenset({0}))))} == {
        "degraded", "nvlink-down"}
    assert t.reading(reading(20, nvlink_active=frozenset({0}))) == []  # cool again, NVLink still down
    assert summary(t.reading(reading(30))) == [("gpu-0", "Healthy", "recovered")]


def test_after_an_xid_or_lost_gpu_the_agent_never_says_healthy() -> None:
    t = translator()
    t.xids([XidEvent(0, 48, at(0))])
    t.reading(reading(5, temperature_c=95.0))
    assert t.reading(reading(10)) == []
    lost = t.reading(reading(20, index=1, lost=True))
    assert summary(lost) == [("gpu-1", "Unhealthy", "gpu-lost")]
    assert t.reading(reading(30, index=1, lost=True)) == [] and t.reading(reading(40, index=1)) == []


def test_row_remap_failure() -> None:
    t = translator()
    assert summary(t.reading(reading(0, row_remap_failure=True))) == [("gpu-0", "Unhealthy", "row-remap-failure")]
    assert t.reading(reading(10, row_remap_failure=True)) == []


def test_snapshot_reports_the_present_state() -> None:
    t = translator()
    healthy = t.snapshot(reading(0, index=1))
    assert healthy["data"]["health"] == "Healthy" and healthy["data"]["device"] == "gpu-1"
    assert healthy["data"]["metrics"] == {"temperature_c": 55.0, "retired_pages": 0.0, "throttle_s": 0.0}
    sick = t.snapshot(reading(0, temperature_c=99.0, ecc_uncorrected=4))
    assert (sick["data"]["health"], sick["data"]["reason"]) == ("Unhealthy", "ecc-uncorrectable")
    assert "4 volatile uncorrectable ECC errors" in sick["data"]["message"]
    assert "temperature_c 99 > 90" in sick["data"]["message"]
    assert len(parse_batch(json.dumps([healthy, sick]).encode())) == 2


def test_lower_agent_thresholds_report_earlier() -> None:
    t = translator(thresholds={"temperature_c": 80.0})
    assert summary(t.reading(reading(0, temperature_c=85.0))) == [("gpu-0", "Unhealthy", "degraded")]


def test_device_template() -> None:
    t = translator(device_template="{node}-{uuid}")
    [event] = t.xids([XidEvent(0, 79, at(0))])
    assert event["data"]["device"] == f"gpu-node-07-{GPUS[0].uuid}"
    for bad in ("gpu-{minor}", "gpu-{index!r}", "gpu-{index.real}"):
        with pytest.raises(ValueError, match="is not one of"):
            AgentConfig(node="n", device_template=bad)


def test_unknown_device_index_still_reports() -> None:
    [event] = translator().xids([XidEvent(7, 79, at(0))])
    assert event["data"]["device"] == "gpu-7" and "uuid unknown" in event["data"]["message"]


def test_a_new_uuid_at_an_index_is_a_replaced_gpu_reported_healthy_once() -> None:
    t = translator()
    t.xids([XidEvent(0, 48, at(0))])
    assert t.reading(reading(5, uuid=GPUS[0].uuid)) == []  # same GPU: an XID never clears here
    [event] = t.reading(reading(10, uuid="GPU-new"))
    assert summary([event]) == [("gpu-0", "Healthy", "replaced")]
    assert f"{GPUS[0].uuid} -> GPU-new" in event["data"]["message"] and "xid" in event["data"]["message"]
    assert t.reading(reading(20, uuid="GPU-new")) == []
    sick = t.reading(reading(30, index=1, uuid="GPU-other", lost=True))
    assert summary(sick) == [("gpu-1", "Unhealthy", "gpu-lost")]  # the new GPU's own readings still count
