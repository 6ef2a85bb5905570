"""Placement holds: "the next pod like this one goes to that node", for the time of an incident.

A same-node reschedule writes a hold before it evicts: the namespace, the labels that name the
pod's place in its workload (they come back on the replacement: a StatefulSet pod's
``statefulset.kubernetes.io/pod-name``, a Job pod's ``batch.kubernetes.io/job-name`` and
completion index), the node, and an expiry. podmedic's mutating admission webhook
(``podmedic admission``) reads the holds and gives a matching new pod a *required* node affinity
to the node, so the controller's replacement (Job, JobSet, StatefulSet, LeaderWorkerSet) lands
there or stays Pending: it never drifts to another node. A workload whose controller recreates every
rank with the failed one (a JobSet's restart, a LeaderWorkerSet group's) would otherwise race the
replacement for the devices the failed rank gave back: the hold also names the labels the ranks share
(``group``), and the webhook gives each other rank's new pod a *preferred* node affinity away from the
node, so it goes elsewhere where it fits and still lands there when nothing else fits. The holds live
in one ConfigMap in podmedic's namespace (one data key per hold, JSON), so any webhook replica answers alike and a
worker that dies leaves nothing that outlives the expiry.

Pure functions: no I/O here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from podmedic.domain.base import Obj

CONFIGMAP = "podmedic-placement-holds"
PINNED_BY = "podmedic.io/pinned-by"
PINNED_NODE = "podmedic.io/pinned-node"
# The labels that name a pod's place in its workload: a controller's replacement carries them again.
IDENTITY_LABELS = (
    "statefulset.kubernetes.io/pod-name",  # StatefulSet (and LeaderWorkerSet) pods: the same name
    "batch.kubernetes.io/job-name",  # Job (and JobSet child Job) pods
    "batch.kubernetes.io/job-completion-index",  # Indexed Jobs: which index
)
# The labels every rank of one workload shares, where its controller recreates them together: a JobSet
# recreates every child Job on a restart (failurePolicy); a LeaderWorkerSet recreates one group.
GROUP_LABELS = (
    ("jobset.sigs.k8s.io/jobset-name",),
    ("leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index"),
)
KEPT_OFF_BY = "podmedic.io/kept-off-by"
KEPT_OFF_NODE = "podmedic.io/kept-off-node"
# The highest preferred-term weight the API allows (k8s.io/api core/v1 PreferredSchedulingTerm: 1-100).
KEEP_OFF_WEIGHT = 100


class Hold(BaseModel):
    """One pinned place: pods created in ``namespace`` whose labels include ``labels`` go to ``node``."""

    namespace: str
    labels: dict[str, str] = Field(min_length=1)
    node: str
    incident_id: str
    reason: str = ""
    group: dict[str, str] = Field(default_factory=dict, description=(
        "The labels the pod's fellow ranks share (empty: none recreated with it); their new pods are "
        "steered off node while the hold lasts"))
    expires_at: float = Field(description="Unix seconds; an expired hold pins nothing")
    tolerations: list[dict[str, str]] = Field(default_factory=list, description=(
        "Tolerations the pinned pod gets too: podmedic's spare taint when the node is a warm spare "
        "(podmedic/domain/spares.py)"))


def hold_key(request_id: str) -> str:
    """The hold's ConfigMap data key (keys allow ``[-._a-zA-Z0-9]``): derived from the recovery
    request, so a retried attempt rewrites the same hold."""
    return "hold-" + hashlib.sha256(request_id.encode()).hexdigest()[:20]


def identity_of(pod: Obj) -> dict[str, str]:
    """The labels of ``pod`` that its controller's replacement will carry too (empty: none known)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {k: str(labels[k]) for k in IDENTITY_LABELS if k in labels}


def group_of(pod: Obj) -> dict[str, str]:
    """The labels ``pod`` shares with the ranks its controller recreates together with it (empty: none)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for keys in GROUP_LABELS:
        if all(k in labels for k in keys):
            return {k: str(labels[k]) for k in keys}
    return {}


def parse_holds(data: dict[str, str] | None) -> tuple[list[Hold], list[str]]:
    """The holds of the ConfigMap's data, and what was wrong with each entry that is not one."""
    holds, errors = [], []
    for key, text in sorted((data or {}).items()):
        try:
            holds.append(Hold.model_validate(json.loads(text)))
        except (ValueError, ValidationError) as err:
            errors.append(f"{CONFIGMAP} data[{key}]: {str(err).splitlines()[0]}")
    return holds, errors


def matching_hold(pod: Obj, namespace: str, holds: list[Hold], now: float) -> Hold | None:
    """The first unexpired hold that names this pod's place."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for hold in holds:
        if hold.namespace == namespace and hold.expires_at > now and \
                all(labels.get(k) == v for k, v in hold.labels.items()):
            return hold
    return None


def fellow_rank_hold(pod: Obj, namespace: str, holds: list[Hold], now: float) -> Hold | None:
    """The first unexpired hold whose group this pod belongs to, for another rank's place."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for hold in holds:
        if hold.namespace == namespace and hold.expires_at > now and hold.group and \
                all(labels.get(k) == v for k, v in hold.group.items()) and \
                not all(labels.get(k) == v for k, v in hold.labels.items()):
            return hold
    return None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _annotate(pod: Obj, notes: dict[str, str]) -> list[dict[str, Any]]:
    """RFC 6902 operations adding ``notes`` to the pod's annotations (creating the map if it has none)."""
    ops: list[dict[str, Any]] = []
    if not (pod.get("metadata") or {}).get("annotations"):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops.extend({"op": "add", "path": f"/metadata/annotations/{_escape(k)}", "value": v} for k, v in notes.items())
    return ops


def _affinity_of(pod: Obj) -> dict[str, Any]:
    """A copy of the pod's affinity, to change and put back whole."""
    return dict(json.loads(json.dumps((pod.get("spec") or {}).get("affinity") or {})))


def pin_patch(pod: Obj, hold: Hold) -> list[dict[str, Any]]:
    """RFC 6902 operations giving ``pod`` a required node affinity to the hold's node (and the hold's
    tolerations: a warm spare's taint).

    ``nodeSelectorTerms`` are ORed and the requirements inside one term ANDed (k8s.io/api core/v1
    ``NodeSelector``), so the node is added to every existing term: the pod keeps its own
    constraints and can only land on the hold's node.
    """
    affinity = _affinity_of(pod)
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    field = {"key": "metadata.name", "operator": "In", "values": [hold.node]}
    required["nodeSelectorTerms"] = [{**t, "matchFields": [*(t.get("matchFields") or []), field]} for t in terms]
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/spec/affinity", "value": affinity}]
    if hold.tolerations:
        own = list((pod.get("spec") or {}).get("tolerations") or [])
        ops.append({"op": "add", "path": "/spec/tolerations", "value": [*own, *hold.tolerations]})
    return [*ops, *_annotate(pod, {PINNED_BY: hold.incident_id, PINNED_NODE: hold.node})]


def keep_off_patch(pod: Obj, hold: Hold) -> list[dict[str, Any]]:
    """RFC 6902 operations giving a fellow rank's ``pod`` a preferred node affinity away from the hold's node.

    Preferred, not required: the pod still lands on the node when no other node fits, so a workload
    is never left Pending by podmedic; its own required terms are untouched.
    """
    affinity = _affinity_of(pod)
    node_affinity = affinity.setdefault("nodeAffinity", {})
    preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    preferred.append({"weight": KEEP_OFF_WEIGHT, "preference": {
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [hold.node]}]}})
    return [{"op": "add", "path": "/spec/affinity", "value": affinity},
            *_annotate(pod, {KEPT_OFF_BY: hold.incident_id, KEPT_OFF_NODE: hold.node})]


def pinned_to(pod: Obj) -> str | None:
    """The node podmedic's webhook pinned this pod to, if it did."""
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(PINNED_NODE)
