"""Where a rescheduled pod may land, and the replacement podmedic creates for a bare pod.

Pure functions over API objects (plain dicts): no I/O here.
"""

from __future__ import annotations

import copy
import hashlib

from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceRef
from podmedic.kube import podview
from podmedic.workload import protocol

PREFER_PREFIX = "prefer.podmedic.io/"
GATE = "podmedic.io/await-eviction"
REPLACES = "podmedic.io/replaces"
CHANGED_BY = "podmedic.io/changed-by"
REASON = "podmedic.io/reason"
# Request/answer annotations of one pod's life: a replacement starts without them.
_PER_POD = (
    protocol.REQUEST, protocol.ACK, protocol.RESTART_REQUEST,
    "podmedic.io/restart-baseline", "podmedic.io/restart-exec", "podmedic.io/progress",
    "kubectl.kubernetes.io/last-applied-configuration",
)
_BLOCKING = ("NoSchedule", "NoExecute")


def prefer_label_key(pod: Obj) -> str | None:
    """The ``prefer.podmedic.io/<name>`` node label the pod's preferred node affinity names:
    the Job template's opt-in to same-node replacement (docs/recovery-restart.md)."""
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    for term in aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        for expr in (term.get("preference") or {}).get("matchExpressions") or []:
            key = str(expr.get("key", ""))
            if key.startswith(PREFER_PREFIX) and expr.get("operator") in ("Exists", "In"):
                return key
    return None


def label_value(incident_id: str) -> str:
    """A label value naming the incident (labels allow 63 characters, no slashes)."""
    return "pm-" + hashlib.sha256(incident_id.encode()).hexdigest()[:16]


def replacement_name(name: str, request_id: str) -> str:
    """The bare pod's replacement: the same name plus a suffix derived from the request id,
    so a retried attempt finds the replacement it already made."""
    suffix = hashlib.sha256(request_id.encode()).hexdigest()[:5]
    return f"{name[:56]}-r{suffix}"


def replacement_pod(pod: Obj, name: str, node: str | None, incident_id: str, reason: str) -> Obj:
    """A copy of a bare pod to recreate it: node-specific bits removed, gated until the old
    pod is gone (``schedulingGates``), preferring ``node`` when given."""
    meta, spec = pod["metadata"], copy.deepcopy(pod.get("spec") or {})
    notes = {k: v for k, v in podview.annotations_of(pod).items() if k not in _PER_POD}
    notes.update({REPLACES: f"{meta['name']} ({meta.get('uid', '')})", CHANGED_BY: incident_id, REASON: reason})
    spec.pop("nodeName", None)
    if spec.get("priorityClassName"):
        spec.pop("priority", None)  # admission recomputes it from the class
    spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": GATE}]
    if node:
        aff = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        aff.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": 100,
             "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}}
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": meta.get("namespace", "default"),
                     "labels": dict(meta.get("labels") or {}), "annotations": notes},
        "spec": spec,
    }


def controller_of(pod: Obj) -> tuple[str, str] | None:
    """``(kind, name)`` of the pod's controller, if it has one."""
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("controller"):
            return str(owner.get("kind")), str(owner.get("name"))
    return None


def _released_with(claim: Obj, pod_uid: str | None) -> bool:
    """Whether ``claim`` was generated for the pod ``pod_uid`` from a ResourceClaimTemplate: the pod is
    its controller (ownerReferences), and the resourceclaim controller deletes it, freeing its devices,
    once the pod is gone (kubernetes/kubernetes pkg/controller/resourceclaim/controller.go). A claim
    the pod names directly (resourceClaimName) outlives it, and its replacement gets the same devices."""
    owners = (claim.get("metadata") or {}).get("ownerReferences") or []
    return pod_uid is not None and any(o.get("uid") == pod_uid and o.get("controller") for o in owners)


def free_healthy_devices(node: str, driver: str, slices: list[Obj], claims: list[Obj], rules: list[Obj],
                         failed: DeviceRef, evicted_pod_uid: str | None = None) -> list[str]:
    """Devices of ``driver`` on ``node`` that no claim holds and no NoSchedule/NoExecute taint
    (in the ResourceSlice or a DeviceTaintRule) keeps off; never the failed device. The devices of the
    claims generated for ``evicted_pod_uid`` count as free: the eviction releases them, so a pod of
    several GPUs can come back on its node in place of the failed one."""
    devices: dict[tuple[str, str], bool] = {}
    for s in slices:
        sspec = s.get("spec") or {}
        if sspec.get("driver") != driver or sspec.get("nodeName") != node:
            continue
        pool = (sspec.get("pool") or {}).get("name", "")
        for d in sspec.get("devices") or []:
            tainted = any(t.get("effect") in _BLOCKING for t in d.get("taints") or [])
            devices[(pool, d["name"])] = not tainted
    for claim in claims:
        if _released_with(claim, evicted_pod_uid):
            continue
        alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        for r in alloc.get("results") or []:
            if r.get("driver") == driver:
                devices.pop((r.get("pool", ""), r.get("device", "")), None)
    for rule in rules:
        rspec = rule.get("spec") or {}
        if (rspec.get("taint") or {}).get("effect") not in _BLOCKING:
            continue
        sel = rspec.get("deviceSelector") or {}
        for pool, dev in list(devices):
            if sel.get("driver") in (None, driver) and sel.get("pool") in (None, pool) \
                    and sel.get("device") in (None, dev):
                devices[(pool, dev)] = False
    devices.pop((failed.pool, failed.device), None)
    return sorted(f"{driver}/{p}/{d}" for (p, d), ok in devices.items() if ok)
