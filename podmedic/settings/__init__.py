"""Every ``PODMEDIC_*`` environment variable, as typed settings: one model per process."""

from podmedic.settings.base import ProcessSettings, SettingsError
from podmedic.settings.processes import (
    PROCESSES,
    AdmissionSettings,
    AgentSettings,
    CliSettings,
    CodecServerSettings,
    IngestSettings,
    StackSettings,
    WorkerSettings,
)

__all__ = ["PROCESSES", "AdmissionSettings",
           "AgentSettings", "CliSettings", "CodecServerSettings", "IngestSettings", "ProcessSettings",
           "SettingsError", "StackSettings", "WorkerSettings"]
