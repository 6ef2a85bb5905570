"""Data that crosses process boundaries: health events, incident input, state and outcome.

Everything here travels through Temporal with the pydantic data converter, so every model
is plain data (no I/O, no clocks) and safe to import from workflow code.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from podmedic.domain.policy_ref import PolicyRef


def _utc_if_naive(when: dt.datetime) -> dt.datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


UtcTime = Annotated[dt.datetime, AfterValidator(_utc_if_naive)]
"""A time with its offset; one given without (RFC 3339 requires it) is taken as UTC, so times from
different sources compare (Python refuses to order naive against aware)."""


class Health(StrEnum):
    """Device health as KEP-4680 reports it in ``allocatedResourcesStatus``."""

    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    UNKNOWN = "Unknown"


class FailureMode(StrEnum):
    """What kind of failure an incident is about; decides which steps make sense."""

    DEVICE_FAILED = "device_failed"
    DEVICE_DEGRADED = "device_degraded"
    CONTAINER_CODE = "container_code"
    INFRASTRUCTURE = "infrastructure"
    BAD_CONFIG = "bad_config"

    @property
    def blames_the_workload(self) -> bool:
        """The workload caused it (its own code, e.g. XID 13/31/43/45, or its configuration): it says
        nothing about the device's or the node's health, so it counts toward no node correlation,
        repeat-offender count or storm."""
        return self in (FailureMode.CONTAINER_CODE, FailureMode.BAD_CONFIG)


class Permanence(StrEnum):
    """Whether a restart can be expected to clear the failure."""

    TRANSIENT = "transient"
    PERMANENT = "permanent"


class Outcome(StrEnum):
    """How an incident ended. Every value is terminal and explained in the incident record."""

    RECOVERED_IN_PLACE = "recovered_in_place"
    RECOVERED_RESCHEDULED = "recovered_rescheduled"
    RESOLVED_BY_VENDOR = "resolved_by_vendor"
    CLEARED = "cleared"
    QUARANTINED = "quarantined"
    NOT_ACTIONABLE = "not_actionable"
    REPORTED = "reported"
    RESTARTED = "restarted"  # a stalled workload: a rank ended, its controller restarted it, steps moving again
    ABORTED = "aborted"
    FAILED = "failed"
    DRY_RUN = "dry_run"


_DNS_UNSAFE = re.compile(r"[^a-z0-9-]+")
_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# The API server's rules for these names in a DeviceTaintRule's selector (kubernetes/kubernetes
# pkg/apis/resource/validation/validation.go, validateDeviceTaintSelector): a name podmedic could
# not put in a rule is refused where it enters (an event), not when the taint fails.
DriverName = Annotated[str, Field(min_length=1, max_length=63, pattern=_SUBDOMAIN.replace("a-z", "A-Za-z"),
                                  description="A DRA driver name: a CSI driver name (a DNS subdomain of at most "
                                              "63 characters, upper case allowed), e.g. gpu.nvidia.com.")]
PoolName = Annotated[str, Field(min_length=1, max_length=253, pattern=f"^{_SUBDOMAIN[1:-1]}(/{_SUBDOMAIN[1:-1]})*$",
                                description="A DRA resource pool name: DNS subdomains joined by '/' (usually "
                                            "the node).")]
DeviceName = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                  description="A device name in its pool: a DNS label, e.g. gpu-3.")]


def object_name(prefix: str, key: str) -> str:
    """A DNS-subdomain-safe cluster object name for ``key``: readable, and unique by its digest."""
    readable = _DNS_UNSAFE.sub("-", key.lower().replace(".", "-")).strip("-")
    return f"{prefix}-{readable[:200]}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


class DeviceRef(BaseModel):
    """One device, named the way DRA names it: driver, pool and device."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    driver: DriverName
    pool: PoolName
    device: DeviceName

    @property
    def resource_id(self) -> str:
        """The KEP-4680 ``resourceID``: ``<driver>/<pool>/<device>``."""
        return f"{self.driver}/{self.pool}/{self.device}"

    @property
    def workflow_id(self) -> str:
        """The incident's Temporal workflow id; one open incident per device."""
        return f"device/{self.resource_id}"

    @property
    def object_name(self) -> str:
        """A DNS-subdomain-safe name for cluster objects that belong to this device."""
        return object_name("podmedic", self.resource_id)

    @classmethod
    def parse(cls, resource_id: str) -> DeviceRef:
        """Parse ``<driver>/<pool>/<device>`` (a pool name may itself hold ``/``); raises ``ValueError``
        naming what is wrong."""
        driver, _, rest = resource_id.partition("/")
        pool, _, device = rest.rpartition("/")
        if not (driver and pool and device):
            raise ValueError(f"resourceID {resource_id!r} is not <driver>/<pool>/<device>")
        return cls(driver=driver, pool=pool, device=device)


class PodKey(BaseModel):
    """A pod by namespace, name and UID."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    name: str
    uid: str = ""


class DeviceHealthEvent(BaseModel):
    """A detector's observation of one device, the single input of the incident pipeline."""

    model_config = ConfigDict(extra="forbid")

    device: DeviceRef
    health: Health
    node: str | None = None
    reason: str = ""
    code: int | None = None
    message: str = ""
    source: str = Field("unknown", description="Detector that saw it: pod-status, http, ...")
    observed_at: UtcTime
    event_id: str = Field(min_length=1, description="Stable id used to drop duplicates.")
    pod: PodKey | None = Field(None, description="The pod that reported it, when a pod did.")
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="Readings behind a degradation report (e.g. ecc_correctable_per_hour), "
        "compared with the driver's detection.degradation thresholds.",
    )
    occurrence: str = Field(
        "", description="For a report of something that happened (an XID, an alert firing), when it was "
        "observed: the same state reported for a new occurrence is news. Empty for a state (pod status).")

    @property
    def state_key(self) -> tuple[str, str, int | None, str]:
        """What makes two observations of a device the same state, for deduplication."""
        return (self.health.value, self.reason, self.code, ",".join(sorted(self.metrics)))


class ConfigProblem(BaseModel):
    """A pod that cannot start because of its own configuration (a driver's prepare failure
    classified ``bad_config``): reported on the pod, never a device incident."""

    model_config = ConfigDict(extra="forbid")

    pod: PodKey
    driver: str
    node: str | None = None
    reason: str
    message: str
    source: str = "events"
    observed_at: dt.datetime
    event_id: str = Field(min_length=1)

    @property
    def workflow_id(self) -> str:
        """One incident per pod instance, ever: a repeating prepare failure never loops."""
        return f"config/{self.pod.namespace}/{self.pod.name}/{self.pod.uid}"


class UnresolvedDevice(BaseModel):
    """A pod reports a device not Healthy under a resourceID podmedic cannot tie to one DRA device
    (a CDI ID shared by several devices of the claim, a claim that is gone): reported on the pod,
    so the report is never lost, and never a device incident (no device is known to taint)."""

    model_config = ConfigDict(extra="forbid")

    pod: PodKey
    node: str | None = None
    entry: str = Field(description="The allocatedResourcesStatus entry: claim:<podClaimName>[/<request>].")
    claim: str | None = Field(None, description="The pod's claim name, when the entry names one.")
    resource_id: str
    health: Health
    message: str = ""
    why: str = Field(description="Why no single device could be found.")
    source: str = "pod-status"
    observed_at: dt.datetime
    event_id: str = Field(min_length=1)

    @property
    def workflow_id(self) -> str:
        """One report per pod instance and resourceID."""
        digest = hashlib.sha256(f"{self.entry}\n{self.resource_id}".encode()).hexdigest()[:10]
        return f"pod-device/{self.pod.namespace}/{self.pod.name}/{self.pod.uid}/{digest}"


def node_workflow_id(node: str) -> str:
    """The node's correlation workflow: one open per node."""
    return f"node/{node}"


class PluginDevice(BaseModel):
    """A pod reports a device-plugin device (an extended resource such as ``nvidia.com/gpu``; KEP-4680's
    first half) Unhealthy, or Healthy again. No DeviceTaintRule can select such a device, so it is a
    node-scoped incident: delivered to the node's incident (``node/<node>``), which quarantines the node."""

    model_config = ConfigDict(extra="forbid")

    pod: PodKey
    node: str = Field(min_length=1)
    resource: str = Field(min_length=1, description="The extended resource: the entry's name, e.g. nvidia.com/gpu.")
    device_id: str = Field(min_length=1, description="The plugin's device ID (resourceID), e.g. a GPU UUID.")
    health: Health
    message: str = ""
    source: str = "pod-status"
    observed_at: dt.datetime
    event_id: str = Field(min_length=1)

    @property
    def name(self) -> str:
        """``<resource>/<device ID>``: how the node incident lists it."""
        return f"{self.resource}/{self.device_id}"

    @property
    def workflow_id(self) -> str:
        """The node's incident."""
        return node_workflow_id(self.node)


class IncidentInput(BaseModel):
    """Start argument of an incident. The policy in force at opening travels with it, by reference
    (``podmedic/domain/policy_ref.py``), so editing the policy file never changes a running incident's
    replay and the Temporal UI's Input stays a few lines."""

    device: DeviceRef
    policy_ref: PolicyRef = Field(description="The driver's policy in force at opening, by digest (its content "
                                              "rides in the start's memo).")
    search_attributes: bool = Field(True, description="Off only on servers without podmedic's attributes.")
    storm: bool = Field(False, description="Opened while its driver was in a storm (the ingest counted "
                                           "detection.storm_fence.devices): once fenced it waits its turn.")
    carry: str | None = Field(None, description="A run continued while waiting for the vendor: the JSON of "
                                                "podmedic.domain.incident.VendorWaitCarry (text, as the domain's "
                                                "incident record builds on this model).")


class PodRef(BaseModel):
    """A pod using the failed device, as seen when the incident opened."""

    namespace: str
    name: str
    uid: str
    created: str = Field("", description="creationTimestamp (RFC 3339), to tell replacements apart.")
    phase: str = ""
    node: str | None = None
    job: str | None = None
    restart_count: int = 0
    containers: list[str] = Field(default_factory=list)
    running: bool = Field(False, description="Every container was running when seen: the process can still "
                                             "answer a checkpoint request, even on a device that failed for good.")
    checkpoint_method: str | None = None
    last_checkpoint_id: str | None = None


class TimelineEntry(BaseModel):
    """One line of the incident's record: what happened, when (workflow time), and why."""

    at: dt.datetime
    step: str
    message: str
