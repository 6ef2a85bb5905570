"""Workflow-side incident metrics, through the SDK's replay-safe ``workflow.metric_meter()``.

The SDK records nothing while a workflow replays, so a worker restart or a cache eviction
never counts an incident twice; the values reach Prometheus/OTLP through the worker's
Runtime (``podmedic/telemetry/temporal_bridge.py``). Durations use workflow time
(``workflow.now()``) against the detector's ``observed_at``: deterministic, and what an
operator means by "from the failure to the taint".
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from temporalio import workflow

if TYPE_CHECKING:
    from podmedic.domain.steps import RecoveryResult
    from workflows.context import IncidentContext


def _driver(wf: IncidentContext) -> str:
    return wf.inp.device.driver


def _failed_at(wf: IncidentContext) -> datetime | None:
    """When the device was first seen failing (the first event that was not Healthy)."""
    return next((e.observed_at for e in wf.events if e.health.value != "Healthy"), None)


def _since_failure(wf: IncidentContext) -> float | None:
    failed = _failed_at(wf)
    return None if failed is None else max(0.0, (workflow.now() - failed).total_seconds())


def phase_entered(wf: IncidentContext, phase: str) -> None:
    """Count an incident entering ``phase``."""
    workflow.metric_meter().create_counter(
        "podmedic_incident_phase_entries", "Device incidents entering each phase.").add(
        1, {"driver": _driver(wf), "phase": phase})


def quarantined(wf: IncidentContext, effect: str) -> None:
    """Record the time from the device's failure to its DeviceTaintRule."""
    seconds = _since_failure(wf)
    if seconds is not None:
        workflow.metric_meter().create_histogram_float(
            "podmedic_time_to_quarantine", "Seconds from a device's first failing event to its taint.", "s").record(
            seconds, {"driver": _driver(wf), "effect": effect})


def recovered(wf: IncidentContext, result: RecoveryResult) -> None:
    """Record the time from the device's failure to a verified recovery of one pod."""
    seconds = _since_failure(wf)
    if result.verified and seconds is not None:
        workflow.metric_meter().create_histogram_float(
            "podmedic_time_to_recover", "Seconds from a device's first failing event to a pod verified "
                                        "Ready on healthy devices.", "s").record(
            seconds, {"driver": _driver(wf), "action": result.action})


def closed(wf: IncidentContext, outcome: str) -> None:
    """Count a closed incident by outcome."""
    workflow.metric_meter().create_counter(
        "podmedic_incidents_closed", "Device incidents closed, by outcome.").add(
        1, {"driver": _driver(wf), "outcome": outcome})
