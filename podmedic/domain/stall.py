"""A workload that stopped stepping with no device saying why: the observation and the incident's record.

A synchronous job whose collective hangs on a link or a peer (Llama 3, arXiv 2407.21783 section 3.3.4:
network faults show as NCCL errors or hangs, no GPU XID) holds every rank until the collective timeout
fires (``init_process_group(timeout=)``, 10 minutes by default for NCCL, often 30-60 in production);
then every rank aborts and the workload's controller restarts it. The progress protocol shows the hang
sooner: no reporting pod's ``podmedic.io/progress`` moves. Ending one rank then makes the controller
restart the workload at once (a JobSet's failure policy, a LeaderWorkerSet's group restart, the peers'
own exit on a lost peer), which is what the timeout would do, minus the wait.

Pure models and functions: no I/O here.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from podmedic.domain.base import Obj
from podmedic.domain.models import Outcome, PodKey
from podmedic.domain.policy_ref import PolicyRef
from podmedic.domain.workloads import LWS_GROUP_LABEL

STALL_S = "podmedic.io/stall-s"
"""A pod's own stall window in seconds (``0``: never judged), over the driver's ``detection.stall.after_s``."""

# The workload a pod belongs to, outermost first: the labels its controller puts on every pod it makes.
WORKLOAD_LABELS = (
    ("JobSet", "jobset.sigs.k8s.io/jobset-name"),
    ("LeaderWorkerSet", "leaderworkerset.sigs.k8s.io/name"),
    ("Job", "batch.kubernetes.io/job-name"),
)


class StalledPod(BaseModel):
    """One reporting pod of a stalled workload, as last seen."""

    pod: PodKey
    node: str | None = None
    step: str = Field(description="Its podmedic.io/progress when it last moved.")
    device: str | None = Field(None, description="A device it holds (driver/pool/device), when known.")


class WorkloadStall(BaseModel):
    """No reporting pod of a workload moved its progress for ``stalled_s`` (at least ``after_s``)."""

    namespace: str
    kind: str
    name: str
    group: str = Field("", description="A LeaderWorkerSet's group index: each group stalls on its own.")
    driver: str = Field(description="The driver of its devices, whose policy applies ('default' when unknown).")
    pods: list[StalledPod] = Field(min_length=1)
    stalled_s: float = Field(ge=0)
    after_s: float = Field(gt=0)
    observed_at: dt.datetime
    event_id: str
    source: str = "progress"

    @property
    def workflow_id(self) -> str:
        """``workload/<namespace>/<kind>/<name>[/<group>]``: one stall incident per workload (group) at a time."""
        return f"workload/{self.namespace}/{self.kind}/{self.name}" + (f"/{self.group}" if self.group else "")

    @property
    def words(self) -> str:
        """The workload as the incident names it (``workload_words``)."""
        return workload_words(self.kind, self.namespace, self.name, self.group)

    @property
    def steps(self) -> tuple[str, ...]:
        """The steps it stands still at, by pod: what a later stall must differ in to be news."""
        return tuple(f"{p.pod.uid}={p.step}" for p in self.pods)


class StallInput(BaseModel):
    """The stall incident's input: the observation, and the driver's policy by reference."""

    stall: WorkloadStall
    policy_ref: PolicyRef = Field(description="The driver's policy by digest; the content rides in the memo "
                                              "(podmedic/domain/policy_ref.py).")
    search_attributes: bool = True


class StallOutcome(BaseModel):
    """How a stall incident ended."""

    incident_id: str
    outcome: Outcome
    explanation: str
    ended: PodKey | None = Field(None, description="The rank podmedic ended, if it ended one.")
    steps_before: str = ""
    steps_after: str = ""
    timeline: list[str] = Field(default_factory=list)


def workload_of(pod: Obj) -> tuple[str, str, str] | None:
    """``(kind, name, group)`` of the workload the pod belongs to, by its controller's labels, else its owner;
    ``group`` is a LeaderWorkerSet pod's group index, ``""`` for every other kind: a group is one replica of a
    model sharded over its pods and steps (or hangs) on its own (kubernetes-sigs/lws README)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for kind, label in WORKLOAD_LABELS:
        if labels.get(label):
            group = str(labels.get(LWS_GROUP_LABEL) or "") if kind == "LeaderWorkerSet" else ""
            return kind, str(labels[label]), group
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    if owner and owner.get("kind") and owner.get("name"):
        return str(owner["kind"]), str(owner["name"]), ""
    return None


def pods_selector(kind: str, name: str, group: str = "") -> str | None:
    """The label selector of the workload's pods (of its group, for a LeaderWorkerSet's); ``None`` for a kind
    known only by its owner."""
    label = dict(WORKLOAD_LABELS).get(kind)
    if label is None:
        return None
    return f"{label}={name}" + (f",{LWS_GROUP_LABEL}={group}" if group else "")


def workload_words(kind: str, namespace: str, name: str, group: str = "") -> str:
    """How the incident names the workload: ``JobSet default/llm``, ``LeaderWorkerSet default/ws group 1``."""
    return f"{kind} {namespace}/{name}" + (f" group {group}" if group else "")


def own_window(annotations: dict[str, str]) -> float | None:
    """The pod's ``podmedic.io/stall-s``, or ``None`` when it sets none or sets something that is no number
    of seconds (then the driver's window applies, and the caller says so)."""
    text = annotations.get(STALL_S)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def step_order(step: str) -> tuple[int, float, str]:
    """A key that sorts steps numerically when they are numbers, else as text (behind the numbers)."""
    try:
        return 0, float(step), ""
    except ValueError:
        return 1, 0.0, step
