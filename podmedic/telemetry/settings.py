"""Telemetry settings of a podmedic process (worker, ingest): flags over its environment.

The variables (``PODMEDIC_METRICS_PORT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``, ...) are the
``Telemetry`` group of ``podmedic.settings``; a flag given wins over its variable. A bad value is
refused with the variable or flag and the reason, like the policy file.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from podmedic.settings import SettingsError
from podmedic.settings.groups import Telemetry, otlp_url

# The command-line flag of each field that has one.
FLAGS = {"prometheus_port": "--metrics-port", "prometheus_host": "--metrics-host",
         "otlp_endpoint": "--otlp-endpoint", "sampling_ratio": "--trace-sampling-ratio"}


class TelemetryError(ValueError):
    """Settings that cannot be used; the message names each field (and its variable) and the reason."""


class TelemetrySettings(BaseModel):
    """Where a process's traces and metrics go. Everything off by default: no port, no OTLP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    service_name: str = Field("podmedic", min_length=1, max_length=255,
                              description="OpenTelemetry service.name of every span and metric.")
    prometheus_host: str = Field("0.0.0.0", min_length=1, description="Address of the Prometheus endpoint.")
    prometheus_port: int | None = Field(None, ge=0, le=65535,
                                        description="Port of the Prometheus endpoint (0: any free one); None: off.")
    otlp_endpoint: str | None = Field(None, description="OTLP/HTTP base URL (traces to /v1/traces, metrics to "
                                                        "/v1/metrics); None: no OTLP export.")
    sampling_ratio: float = Field(1.0, ge=0.0, le=1.0, description="Share of new incident traces kept.")
    export_interval_s: float = Field(15.0, gt=0, le=3600, description="OTLP metric export interval.")
    open_incidents_interval_s: float = Field(15.0, gt=0, le=3600,
                                             description="How often the worker counts open incidents.")

    @field_validator("otlp_endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return otlp_url(value)

    @property
    def metrics_enabled(self) -> bool:
        """Whether any metrics exporter is configured."""
        return self.prometheus_port is not None or self.otlp_endpoint is not None

    @property
    def tracing_enabled(self) -> bool:
        """Whether spans go anywhere (OTLP) and any are kept."""
        return self.otlp_endpoint is not None and self.sampling_ratio > 0


def load_telemetry_settings(role: str, env: Mapping[str, str] | None = None,
                            **overrides: object) -> TelemetrySettings:
    """Settings for ``role`` from ``env`` (default ``os.environ``), flags in ``overrides`` winning.

    Raises:
        TelemetryError: a value is invalid; every bad variable or field (with its flag) is named.
    """
    try:
        group = Telemetry.load(env)
    except SettingsError as exc:
        raise TelemetryError(str(exc)) from None
    raw: dict[str, object] = {
        "service_name": group.service_name or f"podmedic-{role}", "prometheus_host": group.metrics_host,
        "prometheus_port": group.metrics_port, "otlp_endpoint": group.otlp_endpoint,
        "sampling_ratio": group.trace_sampling_ratio, "open_incidents_interval_s": group.open_incidents_interval_s}
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return TelemetrySettings.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"]) or "(settings)"
            where = f"{field} ({FLAGS[field]})" if field in FLAGS else field
            problems.append(f"{where}: {error['msg']}")
        raise TelemetryError("; ".join(problems)) from None
