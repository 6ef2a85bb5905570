"""Classification of a health event into failure mode and permanence, per driver policy.

Pure functions of the event and the policy: the workflow calls them, so they must stay
deterministic (no I/O, no clocks). The order of the rules is the order of trust: an
explicit driver signal (a slice taint's meaning, a prepare failure, a code in the table)
outranks a reading, and a reading outranks the policy's default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from podmedic.domain.models import DeviceHealthEvent, FailureMode, Health, Permanence
from podmedic.domain.policy import DriverPolicy

PREPARE_FAILURE = "FailedPrepareDynamicResources"


class Verdict(BaseModel):
    """What the pipeline should believe about a failure, and why."""

    failure_mode: FailureMode
    permanence: Permanence
    actionable: bool
    why: str


def _verdict(mode: FailureMode, permanence: Permanence, actionable: bool, why: str) -> Verdict:
    return Verdict(failure_mode=mode, permanence=permanence, actionable=actionable, why=why)


def matches_any(patterns: Sequence[str], *texts: str) -> str | None:
    """The first of ``patterns`` found in any of ``texts``, or ``None``."""
    for pattern in patterns:
        if any(re.search(pattern, text) for text in texts if text):
            return pattern
    return None


def prepare_failure_is_device(message: str, policy: DriverPolicy) -> bool:
    """Whether a driver's prepare failure names the device (else it is the pod's config)."""
    rules = policy.detection.prepare_failures
    return matches_any(rules.device_failed, message) is not None and matches_any(rules.bad_config, message) is None


def _by_code(code: int, policy: DriverPolicy) -> Verdict | None:
    codes = policy.classification.codes
    # (codes, failure mode, permanence, actionable, why): the driver's table, first match wins.
    table = (
        (codes.ignore, FailureMode.CONTAINER_CODE, Permanence.TRANSIENT, False, "is on the ignore list"),
        (codes.container_code, FailureMode.CONTAINER_CODE, Permanence.TRANSIENT, True,
         "is caused by the workload, not the device"),
        (codes.permanent, FailureMode.DEVICE_FAILED, Permanence.PERMANENT, True, "is a permanent device failure"),
    )
    for listed, mode, permanence, actionable, why in table:
        if code in listed:
            return _verdict(mode, permanence, actionable, f"code {code} {why} ({policy.driver} table)")
    return None


def _by_readings(event: DeviceHealthEvent, policy: DriverPolicy) -> Verdict:
    limits = policy.detection.degradation
    over = [f"{name} {value:g} > {limits[name]:g}" for name, value in sorted(event.metrics.items())
            if name in limits and value > limits[name]]
    if over:
        return _verdict(FailureMode.DEVICE_DEGRADED, Permanence.TRANSIENT, True,
                        f"degraded: {', '.join(over)} ({policy.driver} thresholds)")
    readings = ", ".join(f"{k} {v:g}" for k, v in sorted(event.metrics.items()))
    return _verdict(FailureMode.DEVICE_DEGRADED, Permanence.TRANSIENT, False,
                    f"readings within {policy.driver} thresholds ({readings})")


def names_the_failure(event: DeviceHealthEvent, policy: DriverPolicy) -> bool:
    """Whether ``event`` says what failed: a rule before the policy's default decides it.

    A bare Unhealthy (pod status without the driver's message) does not; an XID from the node
    agent, a slice taint's reason, a prepare failure or readings do.
    """
    detection = policy.detection
    return (event.health is Health.HEALTHY or event.code is not None or bool(event.metrics)
            or event.reason == PREPARE_FAILURE or event.reason in detection.slice_taints
            or matches_any(detection.infrastructure, event.reason, event.message) is not None)


def classify(event: DeviceHealthEvent, policy: DriverPolicy) -> Verdict:
    """Classify ``event`` by the driver's policy; what no rule covers uses the policy default."""
    if event.health is Health.HEALTHY:
        return _verdict(FailureMode.DEVICE_DEGRADED, Permanence.TRANSIENT, False, "device reported Healthy")
    detection = policy.detection
    if event.reason == PREPARE_FAILURE and not prepare_failure_is_device(event.message, policy):
        return _verdict(FailureMode.BAD_CONFIG, Permanence.TRANSIENT, False,
                        f"prepare failure is the pod's configuration, not the device: {event.message}")
    meaning = detection.slice_taints.get(event.reason)
    if meaning == "ignore":
        return _verdict(FailureMode.DEVICE_DEGRADED, Permanence.TRANSIENT, False,
                        f"slice taint {event.reason} is ignored by {policy.driver} policy")
    if meaning == "permanent":
        return _verdict(FailureMode.DEVICE_FAILED, Permanence.PERMANENT, True,
                        f"slice taint {event.reason} means the device failed for good ({policy.driver} policy)")
    if event.code is not None and (verdict := _by_code(event.code, policy)) is not None:
        return verdict
    infrastructure = matches_any(detection.infrastructure, event.reason, event.message)
    if infrastructure is not None:
        return _verdict(FailureMode.INFRASTRUCTURE, Permanence.TRANSIENT, True,
                        f"fault outside the device (matches {infrastructure!r}): {event.message or event.reason}")
    if event.metrics and event.code is None:
        return _by_readings(event, policy)
    permanence = Permanence(policy.classification.unknown_code_permanence)
    reason = f"code {event.code} is not in {policy.driver}'s table" if event.code is not None else "no code"
    mode = FailureMode.DEVICE_DEGRADED if event.health is Health.UNKNOWN else FailureMode.DEVICE_FAILED
    return _verdict(mode, permanence, True,
                    f"{event.health.value}: {reason}; treated as {permanence.value} by policy")
