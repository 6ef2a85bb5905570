"""The StatefulSet controller (apps/v1): one pod per ordinal, under a stable name.

Upstream: kubernetes/kubernetes pkg/controller/statefulset (``stateful_set_control.go``,
``stateful_set_utils.go``). Pods are named ``<set>-<ordinal>`` for ordinals from
``spec.ordinals.start`` (default 0), labelled ``statefulset.kubernetes.io/pod-name``,
``apps.kubernetes.io/pod-index`` and ``controller-revision-hash``, with ``hostname`` the pod's
name and ``subdomain`` the ``serviceName``. A pod that is gone is recreated under its name; a
Failed pod is deleted first. ``OrderedReady`` (the default) creates a missing ordinal only when
every lower one is Running and Ready; ``Parallel`` creates all at once. Status counts
``replicas``, ``readyReplicas``, ``currentReplicas``, ``updatedReplicas`` and
``availableReplicas``. Deleting a StatefulSet deletes its pods, and a StatefulSet whose owner
was a pod goes with that pod (garbage collection: LeaderWorkerSet's worker sets).
Not simulated: rolling updates, PVC templates, minReadySeconds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.parts import SimParts
from podmedic_sim.reconciler import Reconciler
from podmedic_sim.store import NotFound, StoreError, WatchEvent, json_copy

SetKey = tuple[str, str]
POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
REVISION = "controller-revision-hash"
Labeler = Callable[[Obj, Obj, int], None]


def _controller(obj: Obj) -> Obj | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


class StatefulSetController(Reconciler):
    """Reconciles StatefulSets on their own and their pods' changes."""

    def __init__(self, parts: SimParts, delete_pod: Callable[[Obj, str], None]) -> None:
        super().__init__(parts)
        self._store, self._recorder, self._admission = parts.store, parts.recorder, parts.admission
        self._delete_pod = delete_pod
        self._expected: dict[SetKey, set[str]] = {}  # pod names whose creation is in admission
        # Pod mutations a workload's own pod webhook would make (LeaderWorkerSet's group labels).
        self.labelers: list[Labeler] = []

    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: StatefulSets, the pods they own, and pods that own sets."""
        meta = ev.obj["metadata"]
        ns = meta.get("namespace", "default")
        if ev.resource == "statefulsets":
            if ev.type == "DELETED":
                for pod in self._pods((ns, meta["name"]), meta.get("uid", "")):
                    self._delete_pod(pod, "StatefulSetDeleted")
            else:
                self.mark((ns, meta["name"]))
            return
        if ev.resource != "pods":
            return
        if ev.type == "DELETED":
            for sts in self._store.list("statefulsets", ns):
                owner = _controller(sts)
                if owner and owner.get("kind") == "Pod" and owner.get("uid") == meta.get("uid"):
                    self._delete_set(sts)
        owner = _controller(ev.obj)
        if owner and owner.get("kind") == "StatefulSet":
            self.mark((ns, owner["name"]))

    def _delete_set(self, sts: Obj) -> None:
        meta = sts["metadata"]
        try:
            self._store.delete("statefulsets", meta.get("namespace", "default"), meta["name"])
        except StoreError:
            return

    def _pods(self, key: SetKey, uid: str) -> list[Obj]:
        return [p for p in self._store.list("pods", key[0])
                if (o := _controller(p)) and o.get("kind") == "StatefulSet" and o.get("uid") == uid]

    def reconcile(self, key: SetKey) -> None:
        """Create each missing ordinal (in order unless Parallel), replace Failed pods, write status."""
        sts = self._store.find("statefulsets", *key)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return
        spec = sts.get("spec") or {}
        start = int((spec.get("ordinals") or {}).get("start") or 0)
        replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        ordered = (spec.get("podManagementPolicy") or "OrderedReady") == "OrderedReady"
        pods = {p["metadata"]["name"]: p for p in self._pods(key, sts["metadata"]["uid"])}
        expected = self._expected.setdefault(key, set())
        for ordinal in range(start, start + replicas):
            name = f"{key[1]}-{ordinal}"
            pod = pods.get(name)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Failed" \
                    and not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(pod, "StatefulSetPodFailed")
                pod = None
            if pod is None and name not in expected and self._store.find("pods", key[0], name) is None:
                self._create(sts, name, ordinal)
            if ordered and (pod is None or not _ready(pod)):
                break
        self._write_status(key, sts, [p for n, p in pods.items() if not p["metadata"].get("deletionTimestamp")])

    def _create(self, sts: Obj, name: str, ordinal: int) -> None:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        template = json_copy(spec.get("template") or {})
        tmeta = template.get("metadata") or {}
        revision = f"{meta['name']}-{_revision(template)}"
        pod: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "namespace": meta.get("namespace", "default"),
                "labels": {**(tmeta.get("labels") or {}), POD_NAME: name, POD_INDEX: str(ordinal), REVISION: revision},
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"],
                                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {**(template.get("spec") or {}), "hostname": name,
                     "subdomain": spec.get("serviceName") or meta["name"]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        pod["spec"].setdefault("restartPolicy", "Always")
        for label in self.labelers:
            label(sts, pod, ordinal)
        key = (meta.get("namespace", "default"), meta["name"])
        self._expected[key].add(name)
        made = self._admission.create(pod, lambda p: self._created(sts, p), lambda p: self._settled(key, name))
        if made is not None:
            self._expected[key].discard(name)

    def _created(self, sts: Obj, pod: Obj) -> Obj:
        created = self._store.create("pods", pod)
        self._recorder.event(sts, "SuccessfulCreate",
                             f"create Pod {pod['metadata']['name']} in StatefulSet {sts['metadata']['name']} "
                             "successful", component="statefulset-controller")
        return created

    def _settled(self, key: SetKey, name: str) -> None:
        self._expected.get(key, set()).discard(name)
        self.mark(key)

    def _write_status(self, key: SetKey, sts: Obj, pods: list[Obj]) -> None:
        ready = sum(1 for p in pods if _ready(p))
        status: dict[str, Any] = {
            **(sts.get("status") or {}),
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready,
            "currentReplicas": len(pods), "updatedReplicas": len(pods),
        }
        if status == sts.get("status"):
            return
        try:
            self._store.mutate("statefulsets", key[0], key[1], lambda s: s.__setitem__("status", status))
        except NotFound:
            return


def _revision(template: Obj) -> str:
    """A stable hash of the pod template (the ControllerRevision's name suffix upstream)."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
