"""The LeaderWorkerSet controller (``leaderworkerset.x-k8s.io/v1``): groups of a leader and workers.

Upstream: kubernetes-sigs/lws ``pkg/controllers/leaderworkerset_controller.go``,
``pod_controller.go`` and ``pkg/webhooks/pod_webhook.go``. The LeaderWorkerSet owns a leader
StatefulSet of its own name (``replicas`` groups); each leader pod ``<lws>-<group>`` owns its
group's worker StatefulSet ``<lws>-<group>`` (``size - 1`` replicas, ``Parallel``, ordinals from
1, so workers are ``<lws>-<group>-<1..size-1>``). Every pod is labelled
``leaderworkerset.sigs.k8s.io/name``, ``.../group-index``, ``.../worker-index`` (0 for the leader)
and ``.../group-key`` by LWS's pod webhook (here: a labeler the StatefulSet controller calls).
With ``restartPolicy: RecreateGroupOnPodRestart`` (the default), a pod of the group being deleted
or a container restarting deletes the leader pod, and the worker StatefulSet goes with it: the
whole group is recreated. ``status.readyReplicas`` counts groups whose leader and workers are all
Ready; ``Available`` is True when every group is. Not simulated: rolling updates, subgroups,
startup policy ``LeaderReady``, exclusive placement.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.parts import SimParts
from podmedic_sim.reconciler import Reconciler
from podmedic_sim.statefulsets import StatefulSetController
from podmedic_sim.store import NotFound, StoreError, WatchEvent, json_copy, now_rfc3339

LwsKey = tuple[str, str]
PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME, GROUP, WORKER = PREFIX + "name", PREFIX + "group-index", PREFIX + "worker-index"
RECREATING = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")


def _labels(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


def _restarted(pod: Obj) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(pod["metadata"].get("deletionTimestamp")) or any(int(c.get("restartCount") or 0) for c in statuses)


class LeaderWorkerSetController(Reconciler):
    """Reconciles LeaderWorkerSets through the StatefulSet controller."""

    def __init__(self, parts: SimParts, sets: StatefulSetController, delete_pod: Callable[[Obj, str], None]) -> None:
        super().__init__(parts)
        self._store, self._delete_pod = parts.store, delete_pod
        sets.labelers.append(self._label)
        self._restarts: dict[LwsKey, list[Obj]] = {}  # pods seen deleting or restarted, until reconciled

    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: LeaderWorkerSets, and the pods and StatefulSets of their groups."""
        meta = ev.obj["metadata"]
        ns = meta.get("namespace", "default")
        if ev.resource == "leaderworkersets":
            if ev.type == "DELETED":
                with contextlib.suppress(StoreError):
                    self._store.delete("statefulsets", ns, meta["name"])
            else:
                self.mark((ns, meta["name"]))
        elif ev.resource in ("pods", "statefulsets") and NAME in (meta.get("labels") or {}):
            key = (ns, meta["labels"][NAME])
            if ev.resource == "pods" and (ev.type == "DELETED" or _restarted(ev.obj)):
                self._restarts.setdefault(key, []).append(ev.obj)  # seen now: gone by the next pass
            self.mark(key)

    def _label(self, sts: Obj, pod: Obj, ordinal: int) -> None:
        """LWS's pod webhook: the group and worker labels from the pod's StatefulSet and ordinal."""
        labels = _labels(sts)
        if NAME not in labels:
            return
        group = labels.get(GROUP, str(ordinal))
        worker = "0" if GROUP not in labels else str(ordinal)
        key = hashlib.sha1(f"{pod['metadata']['namespace']}/{labels[NAME]}-{group}".encode()).hexdigest()
        pod["metadata"]["labels"].update({NAME: labels[NAME], GROUP: group, WORKER: worker, PREFIX + "group-key": key})

    def reconcile(self, key: LwsKey) -> None:
        """Leader set, one worker set per leader pod, group recreation, status."""
        lws = self._store.find("leaderworkersets", *key)
        if lws is None:
            return
        spec = lws.get("spec") or {}
        tmpl = spec.get("leaderWorkerTemplate") or {}
        size = int(tmpl.get("size") or 1)
        policy = str(tmpl.get("restartPolicy") or "RecreateGroupOnPodRestart")
        owner = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                 "name": key[1], "uid": lws["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        self._ensure_set(key[0], key[1], owner, int(spec.get("replicas", 1)), 0,
                         tmpl.get("leaderTemplate") or tmpl.get("workerTemplate") or {}, {NAME: key[1], WORKER: "0"})
        pods = [p for p in self._store.list("pods", key[0]) if _labels(p).get(NAME) == key[1]]
        seen = self._restarts.pop(key, [])
        restarted = {p["metadata"].get("uid") for p in seen} | {p["metadata"].get("uid") for p in pods if _restarted(p)}
        leaders = {_labels(p).get(GROUP): p for p in pods if _labels(p).get(WORKER) == "0"}
        for group, leader in leaders.items():
            if policy in RECREATING and not leader["metadata"].get("deletionTimestamp") and any(
                    p["metadata"].get("uid") in restarted for p in self._group_of(leader, pods + seen)):
                self._delete_pod(leader, "RecreateGroupOnPodRestart")
                continue
            if size > 1 and not leader["metadata"].get("deletionTimestamp"):
                pod_owner = {"apiVersion": "v1", "kind": "Pod", "name": leader["metadata"]["name"],
                             "uid": leader["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
                self._ensure_set(key[0], leader["metadata"]["name"], pod_owner, size - 1, 1,
                                 tmpl.get("workerTemplate") or {}, {NAME: key[1], GROUP: str(group)})
        self._write_status(key, lws, pods, size)

    def _group_of(self, leader: Obj, pods: list[Obj]) -> list[Obj]:
        """The leader and the workers of its own worker set (not a previous group's, still going)."""
        meta = leader["metadata"]
        workers = self._store.find("statefulsets", meta.get("namespace", "default"), meta["name"])
        mine = workers is not None and any(r.get("uid") == meta["uid"]
                                           for r in workers["metadata"].get("ownerReferences") or [])
        uid = workers["metadata"]["uid"] if mine and workers is not None else None
        return [leader, *(p for p in pods if uid and any(
            r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or []))]

    def _ensure_set(self, ns: str, name: str, owner: Obj, replicas: int, start: int, template: Obj,
                    labels: dict[str, str]) -> None:
        if self._store.find("statefulsets", ns, name) is not None:
            return  # made already (or the previous group's, still going: made again once it is gone)
        pod_template = json_copy(template)
        tmeta = pod_template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}
        body: Obj = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                     "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
                     "spec": {"replicas": replicas, "podManagementPolicy": "Parallel", "serviceName": name,
                              "ordinals": {"start": start}, "selector": {"matchLabels": labels},
                              "template": pod_template}}
        with contextlib.suppress(StoreError):
            self._store.create("statefulsets", body)

    def _write_status(self, key: LwsKey, lws: Obj, pods: list[Obj], size: int) -> None:
        def ready(p: Obj) -> bool:
            conditions = (p.get("status") or {}).get("conditions") or []
            return not p["metadata"].get("deletionTimestamp") and any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        groups: dict[str, int] = {}
        for p in pods:
            if ready(p):
                groups[_labels(p).get(GROUP, "")] = groups.get(_labels(p).get(GROUP, ""), 0) + 1
        replicas = int((lws.get("spec") or {}).get("replicas", 1))
        ready_groups = sum(1 for n in groups.values() if n >= size)
        available = "True" if ready_groups >= replicas else "False"
        old = lws.get("status") or {}
        conds = [c for c in old.get("conditions") or [] if c.get("type") != "Available"]
        prior = next((c for c in old.get("conditions") or [] if c.get("type") == "Available"), None)
        cond = prior if prior and prior.get("status") == available else {
            "type": "Available", "status": available, "lastTransitionTime": now_rfc3339(),
            "reason": "AllGroupsReady" if available == "True" else "GroupsProgressing",
            "message": f"{ready_groups} of {replicas} groups ready"}
        status: dict[str, Any] = {**old, "replicas": replicas, "readyReplicas": ready_groups,
                                  "conditions": [*conds, cond]}
        if status != old:
            with contextlib.suppress(NotFound):
                self._store.mutate("leaderworkersets", key[0], key[1], lambda o: o.__setitem__("status", status))
