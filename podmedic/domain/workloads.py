"""The workloads a GPU pod belongs to, as their controllers define them (pure: no API calls).

A pod's ``ownerReferences`` lead up to the workload that people run: a Job's pod to its Job, a
JobSet's Jobs to the JobSet, a Kubeflow Trainer TrainJob's JobSet to the TrainJob; a StatefulSet's
pod to it; a LeaderWorkerSet's worker pod to its worker StatefulSet, whose controller is the group's
leader pod, whose StatefulSet belongs to the LeaderWorkerSet. ``activities/discover.py`` walks the
chain with GETs; this module knows each kind: which label names every pod of the workload (the
whole job asked to checkpoint) and whether one failed pod makes the controller restart the group.

Shapes and rules from upstream:
- batch/v1 Job: pods carry ``batch.kubernetes.io/job-name`` (kubernetes/kubernetes, pkg/apis/batch).
- JobSet ``jobset.x-k8s.io/v1alpha2`` (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go):
  label ``jobset.sigs.k8s.io/jobset-name`` on its Jobs and pods. A child Job's failure fails the
  whole JobSet when it has no ``failurePolicy`` (pkg/controllers/failure_policy.go
  ``executeFailurePolicy``: "If no failure policy is defined, mark the JobSet as failed"); with one,
  it restarts the whole JobSet (every Job recreated, up to ``maxRestarts``) unless a rule says
  ``RestartJob`` or ``FailJobSet`` (``defaultFailurePolicyRuleAction`` is ``RestartJobSet``). With
  ``failurePolicy.restartStrategy: InPlaceRestart`` (KEP-467, ``keps/467-InPlaceRestart``) it restarts
  the healthy pods in place and its Jobs recreate the failed pod alone.
- TrainJob ``trainer.kubeflow.org/v1alpha1`` (kubeflow/trainer): runs as a JobSet of its own name
  that it owns, so its pods are the JobSet's and its failures the JobSet's (the JobSet's name is
  from the trainer's docs, not checked against its source here).
- LeaderWorkerSet ``leaderworkerset.x-k8s.io/v1`` (kubernetes-sigs/lws api/leaderworkerset/v1):
  label ``leaderworkerset.sigs.k8s.io/name`` on every pod, ``.../group-index`` per group;
  ``spec.leaderWorkerTemplate.restartPolicy`` defaults to ``RecreateGroupOnPodRestart`` (every pod
  of the group recreated when one restarts); ``None`` (deprecated ``Default``) leaves the others.
- StatefulSet ``apps/v1``: its pods match ``spec.selector.matchLabels``; one pod is replaced alone,
  under the same name (ordinal).
- PyTorchJob ``kubeflow.org/v1`` (kubeflow/training-operator): pods carry
  ``training.kubeflow.org/job-name``; a failed replica restarts alone per its ``restartPolicy``
  (from the operator's docs, not checked against its source here).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from podmedic.domain.base import Obj


@dataclass(frozen=True)
class WorkloadKind:
    """One kind podmedic knows: where it is served and how its pods are found."""

    group: str
    kind: str
    plural: str
    pods_label: str | None = None
    """The label every pod of the workload carries, valued with the workload's name."""


KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind("", "Pod", "pods"),
    WorkloadKind("batch", "Job", "jobs", "batch.kubernetes.io/job-name"),
    WorkloadKind("apps", "StatefulSet", "statefulsets"),
    WorkloadKind("jobset.x-k8s.io", "JobSet", "jobsets", "jobset.sigs.k8s.io/jobset-name"),
    WorkloadKind("trainer.kubeflow.org", "TrainJob", "trainjobs", "jobset.sigs.k8s.io/jobset-name"),
    WorkloadKind("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "leaderworkersets", "leaderworkerset.sigs.k8s.io/name"),
    WorkloadKind("kubeflow.org", "PyTorchJob", "pytorchjobs", "training.kubeflow.org/job-name"),
)
_BY_KIND = {(k.group, k.kind): k for k in KINDS}
MAX_DEPTH = 8
"""Owners followed up from a pod at most (an LWS worker pod has four above it); a cycle stops there too."""


def group_of(api_version: str) -> str:
    """``apps`` of ``apps/v1``; ``""`` of ``v1``."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def known_kind(api_version: str, kind: str) -> WorkloadKind | None:
    """The kind an ownerReference names, when podmedic knows it (any served version)."""
    return _BY_KIND.get((group_of(api_version), kind))


def controller_of(obj: Obj) -> Obj | None:
    """The object's controlling ownerReference (``controller: true``), if any."""
    return next((o for o in (obj.get("metadata") or {}).get("ownerReferences") or [] if o.get("controller")), None)


class WorkloadRef(BaseModel):
    """The workload an affected pod belongs to, as found when the incident opened."""

    kind: str = Field(description="The top owner's kind: JobSet, TrainJob, LeaderWorkerSet, StatefulSet, ...")
    api_version: str
    namespace: str
    name: str
    chain: list[str] = Field(default_factory=list, description="From the pod up: 'Job train-workers-0', ...")
    pods_selector: str | None = Field(None, description="Label selector listing every pod of the workload.")
    restarts_group: bool = Field(False, description="One failed pod makes its controller recreate a group.")
    how: str = Field("", description="How its controller replaces a failed pod, in a sentence.")

    @property
    def label(self) -> str:
        """``JobSet default/train``."""
        return f"{self.kind} {self.namespace}/{self.name}"


LWS_GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
IN_PLACE_RESTART_ATTEMPT = "jobset.sigs.k8s.io/in-place-restart-attempt"
"""The pod annotation of a JobSet's in-place restart agent: the attempt its pod is at (KEP-467)."""


def restarts_in_place(jobset: Obj) -> bool:
    """Whether the JobSet restarts its pods in place (``failurePolicy.restartStrategy: InPlaceRestart``,
    KEP-467) rather than recreating its Jobs."""
    return ((jobset.get("spec") or {}).get("failurePolicy") or {}).get("restartStrategy") == "InPlaceRestart"


def describe_top(top: Obj, namespace: str, chain: list[str], pod_labels: dict[str, str]) -> WorkloadRef:
    """The ``WorkloadRef`` of ``top``, the highest known owner found from a pod (``chain``: the way up;
    ``pod_labels``: the pod's, which place it in a LeaderWorkerSet's group)."""
    api_version, kind = str(top.get("apiVersion", "")), str(top.get("kind", ""))
    name = str((top.get("metadata") or {}).get("name", ""))
    known = known_kind(api_version, kind)
    spec = top.get("spec") or {}
    selector = f"{known.pods_label}={name}" if known and known.pods_label else None
    restarts, how = False, "replaces the failed pod alone"
    if kind == "StatefulSet":
        labels = (spec.get("selector") or {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None
        how = "recreates the failed pod under the same name (its ordinal)"
    elif kind == "JobSet" and spec.get("failurePolicy") is None:
        how = ("marks the whole JobSet Failed when one Job fails (no failurePolicy): nothing recreates it, "
               "so a pod whose Job has no backoffLimit left ends the job")
    elif kind == "JobSet" and restarts_in_place(top):
        how = ("restarts its other pods in place and recreates the failed pod alone (failurePolicy.restartStrategy "
               "InPlaceRestart, KEP-467); a pod that stays on a failed device restarts in place on it")
    elif kind in ("JobSet", "TrainJob"):
        rules = ((spec.get("failurePolicy") or {}).get("rules") or []) if kind == "JobSet" else []
        actions = {str(r.get("action", "")) for r in rules}
        restarts = not actions or bool(actions & {"RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"})
        hint = "; restartStrategy InPlaceRestart would restart the other pods in place" if kind == "JobSet" else ""
        how = (f"recreates every Job of the JobSet when one fails (failurePolicy{hint})" if restarts else
               f"acts on a failed Job as its failurePolicy rules say ({', '.join(sorted(actions))})")
    elif kind == "LeaderWorkerSet":
        policy = str((spec.get("leaderWorkerTemplate") or {}).get("restartPolicy") or "RecreateGroupOnPodRestart")
        restarts = policy in ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")
        if selector and LWS_GROUP_LABEL in pod_labels:  # a group serves alone: it saves and restarts alone
            selector += f",{LWS_GROUP_LABEL}={pod_labels[LWS_GROUP_LABEL]}"
        how = (f"recreates every pod of the failed pod's group (restartPolicy {policy})" if restarts else
               f"restarts the failed pod alone (restartPolicy {policy})")
    elif kind == "Job":
        how = "creates a new pod for the failed one (the Job's backoffLimit counts it)"
    return WorkloadRef(kind=kind, api_version=api_version, namespace=namespace, name=name, chain=chain,
                       pods_selector=selector, restarts_group=restarts, how=how)
