"""The settings groups podmedic's processes mix together: every ``PODMEDIC_*`` variable is a field here.

Each group is one concern (where Temporal is, how to reach it securely, the cluster, telemetry, ...);
``podmedic.settings.processes`` says which groups each process reads. The shipped manifests set
these variables; ``podmedic config show PROCESS`` prints them with their values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from podmedic.settings.base import ProcessSettings, var

DEFAULT_TASK_QUEUE = "podmedic"
DEFAULT_TEMPORAL_ADDRESS = "localhost:7233"


class TemporalTarget(ProcessSettings):
    TITLE: ClassVar[str] = "Temporal (podmedic's variable first, else the temporal CLI's)"

    temporal_address: str = var(DEFAULT_TEMPORAL_ADDRESS, "PODMEDIC_TEMPORAL_ADDRESS", "TEMPORAL_ADDRESS",
                                description="Temporal frontend host:port (--temporal-address)")
    temporal_namespace: str = var("default", "PODMEDIC_NAMESPACE", "TEMPORAL_NAMESPACE",
                                  description="Temporal namespace (--temporal-namespace)")
    temporal_wait: float = Field(60.0, ge=0, validation_alias="PODMEDIC_TEMPORAL_WAIT_S",
                                 description="seconds to keep trying to reach Temporal at start (--temporal-wait)")
    task_queue: str = Field(DEFAULT_TASK_QUEUE, min_length=1, validation_alias="PODMEDIC_TASK_QUEUE",
                            description="task queue of incident workflows (--task-queue)")
    ui_url: str = var("", "PODMEDIC_UI_URL", description="Temporal UI base URL, for links in Events and reports")


class PayloadEncryption(ProcessSettings):
    TITLE: ClassVar[str] = "Payload encryption (docs/security.md)"

    payload_key_file: Path | None = var(None, "PODMEDIC_PAYLOAD_KEY_FILE",
                                        description="AES-256 key file: every payload reaches Temporal encrypted")


class TemporalCredentials(PayloadEncryption):
    """Unset, the temporal CLI's TEMPORAL_TLS*, TEMPORAL_API_KEY and temporal.toml profile apply instead."""

    TITLE: ClassVar[str] = "Temporal security (none set: the temporal CLI's TEMPORAL_TLS_*/API_KEY apply)"

    temporal_tls: bool | None = var(None, "PODMEDIC_TEMPORAL_TLS",
                                    description="1: TLS with the system's roots; 0: plain, even with an API key")
    temporal_tls_ca: Path | None = var(None, "PODMEDIC_TEMPORAL_TLS_CA",
                                       description="PEM file of the server's CA (turns TLS on)")
    temporal_tls_cert: Path | None = var(None, "PODMEDIC_TEMPORAL_TLS_CERT",
                                         description="PEM client certificate for mTLS (with the key)")
    temporal_tls_key: Path | None = var(None, "PODMEDIC_TEMPORAL_TLS_KEY",
                                        description="PEM client private key for mTLS (with the certificate)")
    temporal_tls_server_name: str | None = var(None, "PODMEDIC_TEMPORAL_TLS_SERVER_NAME",
                                               description="name to verify in the server's certificate")
    temporal_api_key_file: Path | None = var(None, "PODMEDIC_TEMPORAL_API_KEY_FILE",
                                             description="file holding an API key (Temporal Cloud); TLS unless TLS=0")
    temporal_api_key: SecretStr | None = var(None, "PODMEDIC_TEMPORAL_API_KEY",
                                             description="the API key itself (prefer the file)")

    SECURITY_FIELDS: ClassVar[tuple[str, ...]] = (
        "temporal_tls", "temporal_tls_ca", "temporal_tls_cert", "temporal_tls_key", "temporal_tls_server_name",
        "temporal_api_key_file", "temporal_api_key")

    @model_validator(mode="after")
    def _mtls_pair(self) -> Self:
        if (self.temporal_tls_cert is None) != (self.temporal_tls_key is None):
            raise ValueError("PODMEDIC_TEMPORAL_TLS_CERT and PODMEDIC_TEMPORAL_TLS_KEY go together (mTLS needs both)")
        return self

    @property
    def podmedic_security_set(self) -> bool:
        """Whether any of podmedic's own security variables is set (then the temporal CLI's are ignored)."""
        return any(self.is_set(name) for name in self.SECURITY_FIELDS)


class Cluster(ProcessSettings):
    TITLE: ClassVar[str] = "Cluster"

    kubeconfig: Path | None = var(None, "PODMEDIC_KUBECONFIG",
                                  description="kubeconfig of the cluster (--kubeconfig; unset: in-cluster, "
                                              "then ~/.kube/config)")
    kube_qps: float = Field(0.0, ge=0, validation_alias="PODMEDIC_KUBE_QPS",
                            description="API requests a second this process makes at most (0: no limit; the "
                                        "manifests set 50, kube-scheduler's)")
    kube_burst: int = Field(100, ge=1, validation_alias="PODMEDIC_KUBE_BURST",
                            description="requests it may make at once above that rate")


class PolicyFile(ProcessSettings):
    TITLE: ClassVar[str] = "Policy"

    policy: Path | None = var(None, "PODMEDIC_POLICY",
                              description="per-driver policy YAML laid over the embedded one (--policy)")


class Logging(ProcessSettings):
    TITLE: ClassVar[str] = "Logging"

    log_format: Literal["text", "json"] = var("text", "PODMEDIC_LOG_FORMAT",
                                              description="text, or json with incident/workflow/trace ids "
                                                          "(--log-format)")


def otlp_url(value: str | None) -> str | None:
    """An OTLP/HTTP base URL without its trailing slash; ``None`` for unset or empty."""
    if value is None or value == "":
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http(s):// URL (OTLP/HTTP, e.g. http://otel-collector:4318)")
    return value.rstrip("/")


class Telemetry(ProcessSettings):
    TITLE: ClassVar[str] = "Telemetry (docs/observability.md)"

    metrics_port: int | None = Field(None, ge=0, le=65535, validation_alias="PODMEDIC_METRICS_PORT",
                                     description="serve Prometheus /metrics on this port (--metrics-port; unset: off)")
    metrics_host: str = var("0.0.0.0", "PODMEDIC_METRICS_HOST", description="address of the metrics endpoint")
    otlp_endpoint: str | None = var(None, "OTEL_EXPORTER_OTLP_ENDPOINT",
                                    description="export traces and metrics by OTLP/HTTP to this base URL")
    service_name: str | None = var(None, "OTEL_SERVICE_NAME",
                                   description="service.name of spans and metrics (unset: podmedic-<process>)")
    trace_sampling_ratio: float = Field(1.0, ge=0, le=1, validation_alias="PODMEDIC_TRACE_SAMPLING_RATIO",
                                        description="share of incident traces kept, 0..1")
    open_incidents_interval_s: float = Field(15.0, gt=0, le=3600,
                                             validation_alias="PODMEDIC_OPEN_INCIDENTS_INTERVAL_S",
                                             description="how often the worker counts open incidents")

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp(cls, value: str | None) -> str | None:
        return otlp_url(value)


class Development(ProcessSettings):
    TITLE: ClassVar[str] = "Development"

    no_hard_exit: bool = var(False, "PODMEDIC_NO_HARD_EXIT",
                             description="1: commands return instead of os._exit (tests that run them in-process)")


def parse_host_port(value: object) -> tuple[str, int] | None:
    """``HOST:PORT`` (text or a pair) as a pair; ``ValueError`` saying what is wrong otherwise."""
    if value is None or isinstance(value, tuple):
        return value
    host, _, port = str(value).rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not HOST:PORT (e.g. 0.0.0.0:8088)")
    return host, int(port)


class WorkerOnly(ProcessSettings):
    TITLE: ClassVar[str] = "Worker"

    health_listen: Annotated[tuple[str, int] | None, NoDecode] = var(None, "PODMEDIC_WORKER_HEALTH_LISTEN",
                                    description="serve /healthz and /readyz here, HOST:PORT (--health-listen)")
    sandbox: bool = var(False, "PODMEDIC_WORKFLOW_SANDBOX",
                        description="run workflow code in the Temporal SDK's sandbox (--sandbox)")
    shutdown_grace: float = Field(50.0, ge=0, validation_alias="PODMEDIC_SHUTDOWN_GRACE_S",
                                  description="seconds running activities get on SIGTERM (--shutdown-grace)")
    pod_cache: bool = var(True, "PODMEDIC_POD_CACHE",
                          description="read pods from one watch of every pod instead of a request per read "
                                      "(--no-pod-cache turns it off)")
    max_cached_workflows: int = Field(1500, ge=1, validation_alias="PODMEDIC_MAX_CACHED_WORKFLOWS",
                                      description="workflows kept in memory between their tasks "
                                                  "(--max-cached-workflows)")
    max_concurrent_activities: int = Field(1000, ge=1, validation_alias="PODMEDIC_MAX_CONCURRENT_ACTIVITIES",
                                           description="activities running at once (--max-concurrent-activities)")

    @field_validator("health_listen", mode="before")
    @classmethod
    def _listen(cls, value: object) -> tuple[str, int] | None:
        return parse_host_port(value)


class WorkerDeployment(ProcessSettings):
    TITLE: ClassVar[str] = "Worker versioning (docs/deploy.md)"

    deployment_name: str | None = var(None, "PODMEDIC_DEPLOYMENT_NAME",
                                      description="Worker Deployment to join, with the build id")
    build_id: str | None = var(None, "PODMEDIC_BUILD_ID", description="this worker's version in that deployment")

    @model_validator(mode="after")
    def _deployment_pair(self) -> Self:
        if bool(self.deployment_name) != bool(self.build_id):
            missing = "PODMEDIC_DEPLOYMENT_NAME" if not self.deployment_name else "PODMEDIC_BUILD_ID"
            raise ValueError(f"{missing} is empty: set PODMEDIC_DEPLOYMENT_NAME and PODMEDIC_BUILD_ID together, "
                             "or neither")
        return self


class IngestOnly(ProcessSettings):
    TITLE: ClassVar[str] = "Ingest"

    dry_run: bool = var(False, "PODMEDIC_DRY_RUN",
                        description="open every incident in dry run: nothing in the cluster changed (--dry-run)")
    settings: Path | None = var(None, "PODMEDIC_INGEST_SETTINGS",
                                description="ingest settings YAML: http, dedup, alertmanager mapping (--settings)")
    ingest_token: SecretStr | None = var(None, "PODMEDIC_INGEST_TOKEN",
                                         description="bearer token every POST must carry (unless http.token_file)")


class LeaderElection(ProcessSettings):
    """client-go's leader election (tools/leaderelection) with kube-controller-manager's defaults."""

    TITLE: ClassVar[str] = "Leader election (cluster watches run on one ingest replica)"

    leader_elect: bool = var(True, "PODMEDIC_LEADER_ELECT",
                             description="watch the cluster only while holding the Lease (0: always, one replica)")
    leader_election_namespace: str = var("default", "PODMEDIC_LEADER_ELECTION_NAMESPACE",
                                         description="namespace of the Lease (the manifests: the pod's own)")
    leader_election_id: str = Field("podmedic-ingest", min_length=1, validation_alias="PODMEDIC_LEADER_ELECTION_ID",
                                    description="name of the Lease the ingest replicas share")
    lease_duration_s: float = Field(15.0, gt=0, validation_alias="PODMEDIC_LEASE_DURATION_S",
                                    description="a standby takes over this long after the leader's last renewal")
    renew_deadline_s: float = Field(10.0, gt=0, validation_alias="PODMEDIC_RENEW_DEADLINE_S",
                                    description="the leader stops watching when it could not renew for this long")
    retry_period_s: float = Field(2.0, gt=0, validation_alias="PODMEDIC_RETRY_PERIOD_S",
                                  description="how often candidates try to acquire and the leader renews")

    @model_validator(mode="after")
    def _lease_timings_ordered(self) -> Self:
        problem = lease_timings_problem(self.lease_duration_s, self.renew_deadline_s, self.retry_period_s)
        if problem:
            raise ValueError(problem)
        return self


def lease_timings_problem(lease_duration_s: float, renew_deadline_s: float, retry_period_s: float) -> str | None:
    """What is wrong with the three timings, as client-go's ``NewLeaderElector`` refuses them: a leader
    must give up before a standby may take over, and must get more than one try before giving up."""
    if lease_duration_s <= renew_deadline_s:
        return (f"the lease duration ({lease_duration_s:g}s) must be greater than the renew deadline "
                f"({renew_deadline_s:g}s)")
    if renew_deadline_s <= 1.2 * retry_period_s:
        return (f"the renew deadline ({renew_deadline_s:g}s) must be greater than 1.2 x the retry period "
                f"({retry_period_s:g}s)")
    return None


class AgentOnly(ProcessSettings):
    TITLE: ClassVar[str] = "Node agent"

    ingest_url: str | None = var(None, "PODMEDIC_INGEST_URL",
                                 description="base URL of `podmedic ingest` (--ingest-url)")
    token_file: Path | None = var(None, "PODMEDIC_INGEST_TOKEN_FILE",
                                  description="file with the bearer token, re-read before each post (--token-file)")
    ingest_token: SecretStr | None = var(None, "PODMEDIC_INGEST_TOKEN",
                                         description="the bearer token itself, when there is no token file")
    sim_url: str | None = var(None, "PODMEDIC_SIM_URL",
                              description="read simulated GPUs from `podmedic sim` here instead of NVML (--sim-url)")
    node: str | None = var(None, "NODE_NAME", description="this node's Kubernetes name (--node; unset: hostname)")


class Simulator(ProcessSettings):
    TITLE: ClassVar[str] = "Simulator"

    sim_audit_dir: Path | None = var(None, "PODMEDIC_SIM_AUDIT_DIR",
                                     description="record every API request the simulator serves here (RBAC proof)")
