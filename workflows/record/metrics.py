"""Workflow-side incident metrics, through the SDK's replay-safe ``workflow.metric_meter()``.

The SDK records nothing while a workflow replays, so a worker restart or a cache eviction
never counts an incident twice; the values reach Prometheus/OTLP through the worker's
Runtime (``podmedic/telemetry/temporal_bridge.py``). Durations use workflow time
(``workflow.now()``) against the detector's ``observed_at``: deterministic, and what an
operator means by "from the failure to the taint".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from temporalio import workflow

if TYPE_CHECKING:
    from podmedic.domain.models import DeviceHealthEvent
    from podmedic.domain.steps import RecoveryResult


def _since_failure(events: Sequence[DeviceHealthEvent]) -> float | None:
    """Seconds since the device was first seen failing (the first of ``events`` that was not Healthy)."""
    failed = next((e.observed_at for e in events if e.health.value != "Healthy"), None)
    return None if failed is None else max(0.0, (workflow.now() - failed).total_seconds())


def phase_entered(driver: str, phase: str) -> None:
    """Count an incident of ``driver``'s device entering ``phase``."""
    workflow.metric_meter().create_counter(
        "podmedic_incident_phase_entries", "Device incidents entering each phase.").add(
        1, {"driver": driver, "phase": phase})


def quarantined(driver: str, events: Sequence[DeviceHealthEvent], effect: str) -> None:
    """Record the time from the device's failure (its first failing event) to its DeviceTaintRule."""
    seconds = _since_failure(events)
    if seconds is not None:
        workflow.metric_meter().create_histogram_float(
            "podmedic_time_to_quarantine", "Seconds from a device's first failing event to its taint.", "s").record(
            seconds, {"driver": driver, "effect": effect})


def recovered(driver: str, events: Sequence[DeviceHealthEvent], result: RecoveryResult) -> None:
    """Record the time from the device's failure (its first failing event) to a verified recovery of one pod."""
    seconds = _since_failure(events)
    if result.verified and seconds is not None:
        workflow.metric_meter().create_histogram_float(
            "podmedic_time_to_recover", "Seconds from a device's first failing event to a pod verified "
                                        "Ready on healthy devices.", "s").record(
            seconds, {"driver": driver, "action": result.action})


def closed(driver: str, outcome: str) -> None:
    """Count a closed incident of ``driver``'s device by outcome."""
    workflow.metric_meter().create_counter(
        "podmedic_incidents_closed", "Device incidents closed, by outcome.").add(
        1, {"driver": driver, "outcome": outcome})
