"""One settings model per podmedic process: the groups of variables each one reads.

``podmedic config show PROCESS`` prints one of these with its values; each process's ``--help``
lists its variables with their defaults.
"""

from __future__ import annotations

from podmedic.settings.admission import AdmissionOnly
from podmedic.settings.base import ProcessSettings
from podmedic.settings.groups import (
    AgentOnly,
    Cluster,
    Development,
    IngestOnly,
    LeaderElection,
    Logging,
    PayloadEncryption,
    PolicyFile,
    Simulator,
    Telemetry,
    TemporalCredentials,
    TemporalTarget,
    WorkerDeployment,
    WorkerOnly,
)


class WorkerSettings(TemporalTarget, TemporalCredentials, Cluster, PolicyFile,
                     WorkerOnly, WorkerDeployment, Telemetry, Logging,
                     Development):
    """``podmedic worker``: the Temporal worker running incident workflows and their activities."""


class IngestSettings(TemporalTarget, TemporalCredentials, Cluster, PolicyFile,
                     IngestOnly, LeaderElection, Telemetry, Logging, Development):
    """``podmedic ingest``: cluster watches and the HTTP front that open incidents."""


class AgentSettings(AgentOnly, PolicyFile, Logging, Development):
    """``podmedic agent nvml``: the node agent posting GPU health to ingest."""


class CliSettings(TemporalTarget, TemporalCredentials, Cluster, PolicyFile,
                     Logging, Development):
    """The operator commands: incidents, report, guard, policy, setup."""


class CodecServerSettings(PayloadEncryption, Logging, Development):
    """``podmedic codec-server``: decrypts payloads for the Temporal UI."""


class AdmissionSettings(Cluster, AdmissionOnly, Logging, Development):
    """``podmedic admission``: the webhook that keeps a replacement pod on its node during an incident."""


class StackSettings(PolicyFile, Simulator, Logging, Development):
    """``podmedic up``, ``demo`` and ``sim``: the local stack (its children read their own settings)."""


PROCESSES: dict[str, type[ProcessSettings]] = {
    "worker": WorkerSettings,
    "ingest": IngestSettings,
    "agent": AgentSettings,
    "cli": CliSettings,
    "codec-server": CodecServerSettings,
    "admission": AdmissionSettings,
    "stack": StackSettings,
}
