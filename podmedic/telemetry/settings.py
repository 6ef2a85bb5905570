"""Telemetry settings of a podmedic process (worker, ingest), from flags and the environment.

=====================================  ===================================================================
``PODMEDIC_METRICS_PORT``              serve Prometheus metrics on this port (``--metrics-port``; unset: off)
``PODMEDIC_METRICS_HOST``              address of that endpoint (``--metrics-host``; default ``0.0.0.0``)
``OTEL_EXPORTER_OTLP_ENDPOINT``        export traces and metrics by OTLP/HTTP to this base URL
                                       (``--otlp-endpoint``; e.g. ``http://otel-collector:4318``)
``OTEL_SERVICE_NAME``                  ``service.name`` of the spans and metrics (default ``podmedic-<role>``)
``PODMEDIC_TRACE_SAMPLING_RATIO``      share of new traces kept, 0..1 (``--trace-sampling-ratio``; default 1)
``PODMEDIC_OPEN_INCIDENTS_INTERVAL_S`` how often the worker counts open incidents (default 15)
=====================================  ===================================================================

A bad value is refused with the variable or flag and the reason, like the policy file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# Which environment variable feeds which field, for error messages and ``from_env``.
ENV = {
    "prometheus_port": "PODMEDIC_METRICS_PORT",
    "prometheus_host": "PODMEDIC_METRICS_HOST",
    "otlp_endpoint": "OTEL_EXPORTER_OTLP_ENDPOINT",
    "service_name": "OTEL_SERVICE_NAME",
    "sampling_ratio": "PODMEDIC_TRACE_SAMPLING_RATIO",
    "open_incidents_interval_s": "PODMEDIC_OPEN_INCIDENTS_INTERVAL_S",
}


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
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s):// URL (OTLP/HTTP, e.g. http://otel-collector:4318)")
        return value.rstrip("/")

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
        TelemetryError: a value is invalid; every bad field is named with its variable.
    """
    env = os.environ if env is None else env
    raw: dict[str, object] = {"service_name": f"podmedic-{role}"}
    for name, variable in ENV.items():
        if env.get(variable, "") != "":
            raw[name] = env[variable]
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return TelemetrySettings.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"]) or "(settings)"
            names = [n for n in (FLAGS.get(field), ENV.get(field)) if n]
            where = f"{field} ({' / '.join(names)})" if names else field
            problems.append(f"{where}: {error['msg']}")
        raise TelemetryError("; ".join(problems)) from None
