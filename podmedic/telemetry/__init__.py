"""OpenTelemetry traces and metrics of podmedic's processes (docs/observability.md)."""

from podmedic.telemetry.metrics import metrics, set_guard_state
from podmedic.telemetry.settings import TelemetryError, TelemetrySettings, load_telemetry_settings
from podmedic.telemetry.setup import Telemetry, current, install

__all__ = ["Telemetry", "TelemetryError", "TelemetrySettings", "current", "install", "load_telemetry_settings",
           "metrics", "set_guard_state"]
