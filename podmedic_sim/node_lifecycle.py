"""A node that dies and comes back: the node lifecycle and taint eviction controllers around a lost kubelet.

Upstream (kubernetes/kubernetes pkg/controller/nodelifecycle, pkg/controller/tainteviction):

- the node's kubelet stops posting status; after ``--node-monitor-grace-period`` (50 s) the node
  lifecycle controller sets its ``Ready`` condition to ``Unknown`` ("Kubelet stopped posting node
  status."), taints it ``node.kubernetes.io/unreachable`` with ``NoSchedule`` and ``NoExecute``, and
  marks its pods not Ready (``MarkPodsNotReady``);
- the taint eviction controller deletes each pod on it once the pod's toleration of the ``NoExecute``
  taint runs out: the API server gives every pod ``tolerationSeconds: 300`` (``DefaultTolerationSeconds``),
  so a dead node's pods stay bound for five minutes; the deletion carries the ``DisruptionTarget``
  condition with reason ``DeletionByTaintManager``;
- the deletion is graceful, and with no kubelet to confirm it the pod stays Terminating until the node is
  back (the Job controller counts it failed and replaces it meanwhile: ``isPodFailed``);
- when the kubelet posts again the node is ``Ready`` and its unreachable taints go.

The kubelet's side (processes gone, no status posted, deletions left pending) is ``KubeletPods.node_down``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.kubelet_pods import KubeletPods
from podmedic_sim.parts import SimParts, set_pod_condition
from podmedic_sim.store import NotFound, WatchEvent, now_rfc3339
from podmedic_sim.taints import find_toleration

UNREACHABLE = "node.kubernetes.io/unreachable"
PodKey = tuple[str, str]


class NodeLifecycle:
    """Node death and return (``POST /sim/v1/faults/node``), as the controllers upstream handle it."""

    def __init__(self, parts: SimParts, kubelet: KubeletPods, delete_pod: Callable[[str, str], Obj]) -> None:
        self._store = parts.store
        self._t = parts.config.timings
        self._timers = parts.timers
        self._recorder = parts.recorder
        self._kubelet = kubelet
        self._delete_pod = delete_pod
        self._epoch: dict[str, int] = {}
        self.unreachable: set[str] = set()  # tainted by the node lifecycle controller
        self._evicting: set[str] = set()  # pod uids with an eviction armed

    def set_down(self, node: str, down: bool) -> None:
        """``node`` dies (``down``) or is back; ``KeyError`` for a node that does not exist."""
        if self._store.find("nodes", None, node) is None:
            raise KeyError(f"no node {node}")
        if down == (node in self._kubelet.down_nodes):
            return  # already so: a second fault of a dead node, or the return of a live one, changes nothing
        epoch = self._epoch[node] = self._epoch.get(node, 0) + 1
        if down:
            self._kubelet.node_down(node)
            self._timers.call_later(self._t.node_monitor_grace_s, lambda: self._silent(node, epoch))
            return
        self._kubelet.node_up(node)
        self.unreachable.discard(node)
        self._store.mutate("nodes", None, node, lambda n: _set_ready(n, "True", "KubeletReady",
                                                                      "kubelet is posting ready status", []))

    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: a pod bound to an unreachable node (after it was tainted) is evicted in its turn."""
        if ev.resource == "pods" and ev.type != "DELETED" \
                and ev.obj.get("spec", {}).get("nodeName") in self.unreachable:
            self._arm(ev.obj)

    def _silent(self, node: str, epoch: int) -> None:
        """The grace period ran out with no word from the kubelet."""
        if self._epoch.get(node) != epoch:
            return
        now = now_rfc3339()
        taints = [{"key": UNREACHABLE, "effect": effect, "timeAdded": now} for effect in ("NoSchedule", "NoExecute")]
        self._store.mutate("nodes", None, node, lambda n: _set_ready(
            n, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", taints))
        self.unreachable.add(node)
        for pod in [p for p in self._store.list("pods") if p.get("spec", {}).get("nodeName") == node]:
            meta = pod["metadata"]
            try:
                self._store.mutate("pods", meta.get("namespace", "default"), meta["name"], _not_ready)
            except NotFound:
                continue
            self._arm(pod)

    def _arm(self, pod: Obj) -> None:
        """Delete ``pod`` when its toleration of the unreachable ``NoExecute`` taint runs out (none: now;
        one without seconds: never)."""
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        if uid in self._evicting or "deletionTimestamp" in meta:
            return
        tol = find_toleration(pod.get("spec", {}).get("tolerations"), UNREACHABLE, "", "NoExecute")
        if tol is not None and tol.get("tolerationSeconds") is None:
            return
        delay = 0.0 if tol is None else min(float(tol["tolerationSeconds"]), self._t.node_toleration_cap_s)
        self._evicting.add(uid)
        node, key = pod["spec"]["nodeName"], (meta.get("namespace", "default"), meta["name"])
        epoch = self._epoch.get(node)
        self._timers.call_later(delay, lambda: self._evict(node, epoch, key, uid))

    def _evict(self, node: str, epoch: int | None, key: PodKey, uid: str) -> None:
        self._evicting.discard(uid)
        pod = self._store.find("pods", *key)
        if self._epoch.get(node) != epoch or pod is None or pod["metadata"].get("uid") != uid \
                or "deletionTimestamp" in pod["metadata"]:
            return
        pod = self._store.mutate("pods", *key, lambda p: set_pod_condition(p, {
            "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint"}))
        self._recorder.event(pod, "TaintManagerEviction", f"Marking for deletion Pod {key[0]}/{key[1]}")
        self._delete_pod(*key)


def _set_ready(node: Obj, status: str, reason: str, message: str, taints: list[dict[str, Any]]) -> None:
    """The node's ``Ready`` condition and its unreachable taints (``taints`` replaces them)."""
    now = now_rfc3339()
    conditions = node.setdefault("status", {}).setdefault("conditions", [])
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        ready = {"type": "Ready"}
        conditions.append(ready)
    if ready.get("status") != status:
        ready["lastTransitionTime"] = now
    ready.update(status=status, reason=reason, message=message, lastHeartbeatTime=now)
    spec = node.setdefault("spec", {})
    kept = [t for t in spec.get("taints") or [] if t.get("key") != UNREACHABLE]
    if kept or taints:
        spec["taints"] = kept + taints
    else:
        spec.pop("taints", None)


def _not_ready(pod: Obj) -> None:
    """``MarkPodsNotReady``: the pod's ``Ready`` condition turns False."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "False":
            cond.update(status="False", lastTransitionTime=now_rfc3339())
