"""Inputs and results of the pipeline's activities, one model each.

Shared by ``workflows/`` (which must stay free of I/O) and ``activities/`` (which do it).
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from podmedic.domain.models import DeviceRef, Health, PodKey, PodRef
from podmedic.domain.policy_recovery import Effect, Eviction, InPlace
from podmedic.domain.ticket_policy import Ticket
from podmedic.domain.workloads import WorkloadRef


class DiscoverInput(BaseModel):
    """Find the pods on a device and the device's health right now."""

    incident_id: str
    device: DeviceRef
    reported_by: list[PodKey] = Field(default_factory=list, description="Pods named by the events.")
    first_event: dt.datetime | None = Field(
        None, description="When the incident's first event was observed: a pod that ended on the device "
                          "shortly before it still counts as affected.")


class DeviceHealthReading(BaseModel):
    """Device health as the cluster shows it: pods' allocatedResourcesStatus and driver taints."""

    health: Health
    message: str = ""
    source: str = ""


class Discovery(BaseModel):
    """What was found when the incident opened."""

    node: str | None
    pods: list[PodRef]
    reading: DeviceHealthReading
    job_pods: list[PodRef] = Field(
        default_factory=list,
        description="Other pods of the affected pods' workload (not on the device): checkpointed together, "
                    "not recovered.",
    )
    workload: WorkloadRef | None = Field(None, description="What the first affected pod belongs to, from its "
                                                           "ownerReferences; None for a bare pod.")


class CheckpointStatus(StrEnum):
    """Per-pod result of a checkpoint request."""

    SAVED = "saved"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    FAILED = "failed"
    HUNG = "hung"  # the workload stopped progressing while asked: no answer could come (checkpoints/hang.py)


STOPPED_ON_DEAD_DEVICE = "not running on a device that failed permanently: cannot save"
"""Why a pod is not waited for: its process stopped and the device will not run it again."""


class CheckpointAggregate(StrEnum):
    """How much of the job was saved: every pod asked, some of them, or none."""

    COMPLETE = "complete"
    PARTIAL = "partial"
    NONE = "none"


class CheckpointInput(BaseModel):
    """Ask every pod on the device to save its state, and wait for the answers."""

    incident_id: str
    request_id: str
    pods: list[PodRef]
    timeout_s: float
    poll_s: float
    device_dead: bool = Field(False, description="The device failed for good: a pod whose containers stop is "
                                                 "not waited for, since no answer can come from it.")
    hang_s: float = Field(0.0, description="Stop waiting when no reporting pod's progress moved this long and none "
                                           "took the request up (the workload is hung); 0: wait the whole timeout.")


class PodCheckpoint(BaseModel):
    """One pod's answer."""

    pod: str
    method: str | None
    status: CheckpointStatus
    checkpoint_id: str | None = None
    location: str | None = None
    reason: str = ""
    namespace: str = ""
    locations: list[str] = Field(default_factory=list, description="Every location (kubelet: one per container).")


class CheckpointReport(BaseModel):
    """Every pod's answer; ``partial`` when some saved and some did not."""

    results: list[PodCheckpoint] = Field(default_factory=list)
    request_id: str = Field("", description="The one request id every pod of the job was asked with.")

    @property
    def saved(self) -> int:
        """Pods whose checkpoint was saved for this request."""
        return sum(1 for r in self.results if r.status is CheckpointStatus.SAVED)

    @property
    def aggregate(self) -> CheckpointAggregate:
        """``complete`` when every pod saved, ``partial`` when some did, else ``none``."""
        if self.results and self.saved == len(self.results):
            return CheckpointAggregate.COMPLETE
        return CheckpointAggregate.PARTIAL if self.saved else CheckpointAggregate.NONE

    @property
    def summary(self) -> str:
        """For people: ``partial: 2/3 pods``."""
        return f"{self.aggregate.value}: {self.saved}/{len(self.results)} pods"

    @property
    def checkpoint_ids(self) -> list[str]:
        """Ids of the checkpoints that were saved or already existed."""
        return [r.checkpoint_id for r in self.results if r.checkpoint_id]


class TaintInput(BaseModel):
    """Create (or find) this incident's DeviceTaintRule."""

    incident_id: str
    device: DeviceRef
    effect: Effect
    reason: str


class TaintResult(BaseModel):
    """The rule in force; ``unavailable`` says why there is none (the cluster serves no DeviceTaintRule)."""

    rule_name: str
    created: bool
    effect: Effect
    unavailable: str = ""


class RecoverInput(BaseModel):
    """Run one rung of the recovery ladder for one pod and verify it."""

    incident_id: str
    request_id: str
    pod: PodRef
    device: DeviceRef
    timeout_s: float
    poll_s: float
    in_place: InPlace = Field(default_factory=InPlace)
    eviction: Eviction = Field(default_factory=Eviction)
    verify_progress: bool = True
    move_off: bool = Field(False, description="The pod's node is going away (announced maintenance): an any_node "
                                              "move goes to a warm spare of the node's pool first.")


REPLACED_BY_CONTROLLER = "replaced_by_controller"
"""A recovery's ``action`` when the pod's own controller replaced it, podmedic evicting nothing."""


class RecoveryResult(BaseModel):
    """Whether the rung verified (pod Ready, its devices Healthy), and where the pod is.

    ``action`` is what recovered the pod, which may differ from the rung that ran: a ``same_node``
    rung whose replacement landed elsewhere reports ``any_node``; one whose pod its controller had
    already replaced reports ``replaced_by_controller``.
    """

    verified: bool
    action: str
    pod: PodRef | None = None
    devices: list[str] = Field(default_factory=list)
    same_node: bool | None = None
    detail: str = ""
    notes: list[str] = Field(default_factory=list, description="What happened on the way (blocked evictions...).")


class TicketInput(BaseModel):
    """File a vendor ticket; ``url`` may hold ``${VAR}`` expanded by the worker.

    ``ticket`` is the policy's ticket section: backend, endpoints and the *names* of the files or
    environment variables holding credentials (never their values). ``evidence`` is the part of
    the evidence bundle the workflow knows, capped in size; the activity adds the rest.
    """

    incident_id: str
    idempotency_key: str
    url: str
    evidence: dict[str, Any]
    ticket: Ticket | None = None
    escalate: str = Field("", description="Why a new ticket is warranted although the device's last one is "
                                          "open (the repeat-offender threshold crossed); empty otherwise.")


class TicketResult(BaseModel):
    """The filed ticket, or why none was filed; ``reused`` when the device's open ticket (same fault
    episode) got this incident's evidence instead."""

    filed: bool
    ticket_id: str | None = None
    detail: str = ""
    backend: str = ""
    reused: bool = False


class TicketStatusInput(BaseModel):
    """Ask the backend whether the vendor resolved a ticket."""

    url: str
    ticket_id: str
    ticket: Ticket | None = None


class TicketNoteInput(BaseModel):
    """Add a note to an open ticket (the device went back into service, say), once per ``idempotency_key``."""

    incident_id: str
    idempotency_key: str
    url: str
    ticket_id: str
    text: str = Field(min_length=1, max_length=2000)
    ticket: Ticket | None = None


class DeviceInput(BaseModel):
    """A device, for health reads."""

    device: DeviceRef


class UntaintInput(BaseModel):
    """Remove this incident's rule, and only this incident's."""

    incident_id: str
    device: DeviceRef
    rule_name: str
    stopped: str = Field("", description="Why the incident stopped without verifying its device (aborted, "
                                         "canceled, a step gave up): its run lets go of the rule and never deletes "
                                         "it; a rule left with no holder is the fleet guard's sweep's to settle by "
                                         "the device's health. Empty: the device verified, the rule may go.")


class PodNoticeInput(BaseModel):
    """Tell a pod's owner what podmedic saw or did: a Kubernetes Event and annotations."""

    incident_id: str
    pod: PodKey
    reason: str = Field(description="CamelCase Event reason, e.g. PodmedicBadConfig.")
    message: str
    warning: bool = True
    annotations: dict[str, str] = Field(default_factory=dict)


class PodNoticeResult(BaseModel):
    """What reached the pod; a pod already gone is not an error."""

    pod_found: bool
    event_recorded: bool


class UntaintResult(BaseModel):
    """What releasing a DeviceTaintRule did: removed it, or kept it and why."""

    removed: bool
    kept_for: list[str] = Field(default_factory=list, description="Incident runs that still hold the rule.")
    detail: str = ""
