"""Classification, flapping and correlation rules: pure functions of events and policy."""

from __future__ import annotations

import datetime as dt

import pytest

from podmedic.domain.classify import PREPARE_FAILURE, classify
from podmedic.domain.flapping import transitions_within
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, FailureMode, Health, Permanence
from podmedic.domain.node import NodeDeviceReport, correlated
from podmedic.domain.policy_detection import NodeCorrelation
from podmedic.domain.policy_file import PolicyError, load_policy, parse_policy

NVIDIA = load_policy(None).for_driver("gpu.nvidia.com")
DEVICE = DeviceRef(driver="gpu.nvidia.com", pool="node-0001", device="gpu-2")
T0 = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def _event(health: Health = Health.UNHEALTHY, *, reason: str = "", code: int | None = None, message: str = "",
           metrics: dict[str, float] | None = None, after_s: float = 0,
           device: DeviceRef = DEVICE) -> DeviceHealthEvent:
    return DeviceHealthEvent(device=device, health=health, reason=reason, code=code, message=message,
                             metrics=metrics or {}, observed_at=T0 + dt.timedelta(seconds=after_s),
                             event_id=f"e-{health}-{after_s}")


@pytest.mark.parametrize(("code", "mode", "permanence", "actionable"), [
    (79, FailureMode.DEVICE_FAILED, Permanence.PERMANENT, True),
    (48, FailureMode.DEVICE_FAILED, Permanence.PERMANENT, True),
    (13, FailureMode.CONTAINER_CODE, Permanence.TRANSIENT, True),
    (109, FailureMode.CONTAINER_CODE, Permanence.TRANSIENT, False),
    (999, FailureMode.DEVICE_FAILED, Permanence.TRANSIENT, True),
])
def test_xid_table(code: int, mode: FailureMode, permanence: Permanence, actionable: bool) -> None:
    verdict = classify(_event(code=code), NVIDIA)
    assert (verdict.failure_mode, verdict.permanence, verdict.actionable) == (mode, permanence, actionable)
    assert str(code) in verdict.why


def test_slice_taint_meanings() -> None:
    lost = classify(_event(reason="gpu.nvidia.com/gpu-lost"), NVIDIA)
    assert lost.permanence is Permanence.PERMANENT and lost.failure_mode is FailureMode.DEVICE_FAILED
    by_code = classify(_event(reason="gpu.nvidia.com/xid", code=31), NVIDIA)
    assert by_code.failure_mode is FailureMode.CONTAINER_CODE


def test_prepare_failure_bad_config_versus_device() -> None:
    config = classify(_event(reason=PREPARE_FAILURE, message="invalid opaque config: unknown field sharing"), NVIDIA)
    assert config.failure_mode is FailureMode.BAD_CONFIG and not config.actionable
    device = classify(_event(reason=PREPARE_FAILURE, code=79, message="device gpu-2 is unhealthy: XID 79"), NVIDIA)
    assert device.failure_mode is FailureMode.DEVICE_FAILED and device.permanence is Permanence.PERMANENT
    unmatched = classify(_event(reason=PREPARE_FAILURE, message="something odd happened"), NVIDIA)
    assert unmatched.failure_mode is FailureMode.BAD_CONFIG  # unknown prepare failures never taint


def test_infrastructure_and_degradation() -> None:
    infra = classify(_event(message="NVSwitch fatal error on tray 2"), NVIDIA)
    assert infra.failure_mode is FailureMode.INFRASTRUCTURE and infra.actionable
    hot = classify(_event(metrics={"temperature_c": 95, "throttle_s": 10}), NVIDIA)
    assert hot.failure_mode is FailureMode.DEVICE_DEGRADED and hot.actionable and "temperature_c 95 > 90" in hot.why
    fine = classify(_event(metrics={"temperature_c": 70}), NVIDIA)
    assert fine.failure_mode is FailureMode.DEVICE_DEGRADED and not fine.actionable


def test_healthy_is_never_actionable() -> None:
    assert not classify(_event(Health.HEALTHY, code=79), NVIDIA).actionable


def test_transitions_count_only_changes_within_the_window() -> None:
    flips = [Health.UNKNOWN, Health.HEALTHY, Health.UNHEALTHY, Health.UNKNOWN, Health.HEALTHY]
    events = [_event(h, after_s=100 * i) for i, h in enumerate(flips)]
    assert transitions_within(events, 1000) == 3  # Unhealthy -> Unknown is not a change of side
    assert transitions_within(events, 150) == 1
    assert transitions_within(events[:1], 1000) == 0


def test_correlation_needs_enough_distinct_devices_in_the_window() -> None:
    rule = NodeCorrelation(devices=3, window_s=60)

    def report(device: str, after_s: float) -> NodeDeviceReport:
        ref = DeviceRef(driver="gpu.nvidia.com", pool="node-0001", device=device)
        return NodeDeviceReport(incident_id=ref.workflow_id, device=ref, failure_mode=FailureMode.DEVICE_FAILED,
                                observed_at=T0 + dt.timedelta(seconds=after_s))

    assert correlated([report("gpu-0", 0), report("gpu-0", 10), report("gpu-1", 20)], rule) == []
    group = correlated([report("gpu-0", 0), report("gpu-1", 30), report("gpu-2", 50)], rule)
    assert sorted(r.device.device for r in group) == ["gpu-0", "gpu-1", "gpu-2"]
    assert correlated([report("gpu-0", 0), report("gpu-1", 30), report("gpu-2", 90)], rule) == []


def test_bad_patterns_in_policy_are_refused_with_their_path() -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy("drivers:\n  default:\n    detection:\n      prepare_failures: {bad_config: ['(unclosed']}\n")
    assert any("prepare_failures.bad_config" in path and "regular expression" in why for path, why in err.value.errors)
    with pytest.raises(PolicyError) as err2:
        parse_policy("drivers:\n  default:\n    detection:\n      slice_taints: {x/y: sometimes}\n")
    assert any("slice_taints" in path for path, _ in err2.value.errors)
