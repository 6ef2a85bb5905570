"""The simulated kubelets' pod bookkeeping: admission, deletion, health reports, status writes.

Transitions (started, crashed, restarted, deleted) write pod status right away; device
health changes are batched into the next periodic report (``timings.kubelet_report_s``),
as the real kubelet's status manager does. The container lifecycle on top of this
bookkeeping is ``podmedic_sim.kubelet``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol

from podmedic.domain.base import Obj
from podmedic_sim.device_plugins import PluginDevice
from podmedic_sim.devices import DevKey, Fault
from podmedic_sim.kubelet_status import ContainerRt, PodKey, PodRt, render_status
from podmedic_sim.parts import SimParts
from podmedic_sim.store import NotFound, WatchEvent, now_rfc3339
from podmedic_sim.timers import Coalescer

KILL_EXIT_CODE = 143  # SIGTERM on graceful deletion
NODE_LOST_EXIT_CODE = 255  # what a container that died with its node shows once the kubelet is back


class KubeletHooks(Protocol):
    """What the workloads want to hear from the kubelet."""

    def on_container_started(self, rt: PodRt, c: ContainerRt) -> None: ...
    def on_container_stopped(self, rt: PodRt, c: ContainerRt) -> None: ...
    def absorbs_failure(self, rt: PodRt, c: ContainerRt) -> bool: ...


class KubeletPods(ABC):
    """The pods bound to nodes, from admission to removal, and what their status says."""

    def __init__(self, parts: SimParts) -> None:
        self._store = parts.store
        self._t = parts.config.timings
        self._config = parts.config
        self._timers = parts.timers
        self._devices = parts.devices
        self._claims = parts.claims
        self._recorder = parts.recorder
        self._plugin_devices = parts.plugin_devices
        self.pods: dict[PodKey, PodRt] = {}
        self.hooks: list[KubeletHooks] = []
        self.node_has_image: Callable[[str, str], bool] = lambda node, image: False
        self._pulls: dict[tuple[str, str], list[tuple[PodRt, ContainerRt]]] = {}
        self._dirty: set[PodKey] = set()
        self._report = Coalescer(parts.timers, self._t.kubelet_report_s, self._flush_reports)
        self._ip_seq = 0
        self.down_nodes: set[str] = set()
        parts.devices.health_listeners.append(self.on_health)
        parts.plugin_devices.listeners.append(self.on_plugin_health)

    # -- store events ------------------------------------------------------------------
    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: start pods bound to a node, stop deleted ones."""
        if ev.resource != "pods":
            return
        pod = ev.obj
        meta = pod["metadata"]
        key = (meta.get("namespace", "default"), meta["name"])
        rt = self.pods.get(key)
        if rt is not None and rt.uid != meta.get("uid"):
            self._forget(rt)
            rt = None
        if ev.type == "DELETED":
            if rt is not None:
                self._forget(rt)
            self._claims.release_pod(pod, delete_generated=True)
            return
        node = pod.get("spec", {}).get("nodeName")
        if node in self.down_nodes:
            return  # nobody on the node: a pod bound there waits, a deleted one stays Terminating (node_up)
        # A kubelet runs only on a node that exists: a pod bound to a name no Node has stays Pending with no
        # container statuses, as on a cluster where no kubelet serves that name. Deleted, it stays Terminating
        # until the pod garbage collector force-deletes it as an orphan (podgc gcOrphaned; upstream collects a
        # live orphan too, which the simulator leaves for tests that want pods no kubelet runs).
        if rt is None and (not node or self._store.find("nodes", None, node) is None):
            if node and "deletionTimestamp" in meta:
                uid = meta.get("uid", "")
                self._timers.call_later(self._t.orphan_gc_s, lambda: self._remove(key, uid))
            return
        if rt is None and pod.get("status", {}).get("phase", "Pending") == "Pending":
            refused = self._plugin_devices.admit(pod, node)
            if refused is not None:
                self._timers.call_later(0, lambda: self._refuse(key, meta.get("uid", ""), refused))
                return
            rt = self._admit(pod, node)
        if rt is not None and "deletionTimestamp" in meta and not rt.deleting:
            self._timers.call_later(0, lambda: self._begin_delete(rt))
        elif rt is None and "deletionTimestamp" in meta:
            self._timers.call_later(0, lambda: self._remove(key, meta.get("uid", "")))

    def _refuse(self, key: PodKey, uid: str, message: str) -> None:
        """Admission failed (too few device-plugin devices): the pod fails, as the kubelet's
        admission handler fails it (pkg/kubelet/lifecycle: reason UnexpectedAdmissionError)."""

        def fail(p: Obj) -> None:
            if p["metadata"].get("uid") == uid:
                p.setdefault("status", {}).update(
                    {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": message})

        try:
            pod = self._store.mutate("pods", key[0], key[1], fail)
        except NotFound:
            return
        self._recorder.event(pod, "UnexpectedAdmissionError", message, type_="Warning",
                             host=pod.get("spec", {}).get("nodeName"))

    def _admit(self, pod: Obj, node: str) -> PodRt:
        spec = pod["spec"]
        containers = [
            ContainerRt(
                name=c["name"],
                image=c.get("image", ""),
                claim_refs=list((c.get("resources") or {}).get("claims") or []),
                restart_policy=c.get("restartPolicy") or spec.get("restartPolicy") or "Always",
                rules=list(c.get("restartPolicyRules") or []),
            )
            for c in spec.get("containers") or []
        ]
        self._ip_seq += 1
        rt = PodRt(
            (pod["metadata"].get("namespace", "default"), pod["metadata"]["name"]),
            pod["metadata"]["uid"],
            node,
            spec.get("restartPolicy") or "Always",
            containers,
            pod_ip=f"10.244.{self._ip_seq // 250 % 250}.{self._ip_seq % 250 + 2}",
        )
        node_obj = self._store.find("nodes", None, node) or {}
        addrs = node_obj.get("status", {}).get("addresses") or []
        rt.host_ip = next((a["address"] for a in addrs if a.get("type") == "InternalIP"), "")
        self.pods[rt.key] = rt
        self._timers.call_later(0, lambda: self._start_pod(rt))
        return rt

    # -- container lifecycle (podmedic_sim.kubelet) ------------------------------------
    @abstractmethod
    def _start_pod(self, rt: PodRt) -> None: ...

    @abstractmethod
    def exit_container(self, rt: PodRt, c: ContainerRt, code: int, reason: str = "Error") -> None: ...

    @abstractmethod
    def _crasher(self, rt: PodRt, c: ContainerRt, gen: int) -> Callable[[], None]: ...

    def _terminate(self, rt: PodRt, c: ContainerRt, code: int, reason: str) -> None:
        """The running container's process ended with ``code``: its terminated state, its back-off count
        (reset after ``backoff_reset_s`` of running) and the workloads told; what follows is the caller's."""
        c.bump()
        c.state, c.exit_code, c.term_reason, c.finished_at = "terminated", code, reason, now_rfc3339()
        ran = self._timers.now() - c.started_mono
        c.crashes = 1 if ran >= self._t.backoff_reset_s else c.crashes + 1
        for hook in self.hooks:
            hook.on_container_stopped(rt, c)

    # -- deletion ----------------------------------------------------------------------
    def _begin_delete(self, rt: PodRt) -> None:
        if rt.gone or rt.deleting:
            return
        rt.deleting = True
        for c in rt.containers:
            if c.state == "running":
                self._event(rt, "Killing", f"Stopping container {c.name}")
                self.exit_container(rt, c, KILL_EXIT_CODE, "Error")
            else:
                c.bump()
        self._write(rt)
        self._timers.call_later(self.grace_s(rt.key), lambda: self._remove(rt.key, rt.uid))

    def grace_s(self, key: PodKey) -> float:
        """How long a deleted pod's processes get between SIGTERM and removal: its
        ``deletionGracePeriodSeconds``, capped by the simulator's compressed ``termination_grace_s``."""
        pod = self._store.find("pods", *key)
        grace = (pod or {}).get("metadata", {}).get("deletionGracePeriodSeconds")
        return self._t.termination_grace_s if grace is None else min(float(grace), self._t.termination_grace_s)

    def _remove(self, key: PodKey, uid: str) -> None:
        """The kubelet's final DELETE (grace 0) once the containers stopped; finalizers still hold the pod."""
        pod = self._store.find("pods", *key)
        if pod is None or pod["metadata"].get("uid") != uid:
            return
        if not pod["metadata"].get("finalizers"):
            self._store.delete("pods", *key)
        elif pod["metadata"].get("deletionGracePeriodSeconds") != 0:
            self._store.mutate("pods", *key, lambda p: p["metadata"].update(deletionGracePeriodSeconds=0))

    def _forget(self, rt: PodRt) -> None:
        if rt.gone:
            return
        rt.gone = True
        self.pods.pop(rt.key, None)
        self._plugin_devices.release(rt.uid)
        self._dirty.discard(rt.key)
        for c in rt.containers:
            c.bump()
            if c.state == "running":
                c.state = "terminated"
                for hook in self.hooks:
                    hook.on_container_stopped(rt, c)
        self._reset_transient(rt, rt.devices)

    # -- node death --------------------------------------------------------------------
    def node_down(self, node: str) -> None:
        """``node`` is lost (a host fault, a power cut): every process on it ends with it, unseen, and the
        kubelet posts nothing (no pod status, no deletion finished) until ``node_up``."""
        self.down_nodes.add(node)
        for rt in [rt for rt in self.pods.values() if rt.node == node]:
            for c in rt.containers:
                if c.state == "running":
                    self._terminate(rt, c, NODE_LOST_EXIT_CODE, "Unknown")
                    rt.lost.append(c.name)
                else:
                    c.bump()  # a start under way never happens

    def node_up(self, node: str) -> None:
        """``node`` is back (rebooted): its kubelet finishes the pods deleted meanwhile, restarts or ends the
        others by their restart policy, and admits the pods bound to it meanwhile."""
        self.down_nodes.discard(node)
        for rt in [rt for rt in self.pods.values() if rt.node == node]:
            pod = self._store.find("pods", *rt.key)
            if pod is None or "deletionTimestamp" in pod["metadata"]:
                self._remove(rt.key, rt.uid)
            else:
                self._rebooted(rt)
        for pod in self._store.list("pods"):
            meta = pod["metadata"]
            key = (meta.get("namespace", "default"), meta["name"])
            if pod.get("spec", {}).get("nodeName") == node and key not in self.pods:
                self.on_event(WatchEvent("MODIFIED", "pods", pod, self._store.resource_version))

    @abstractmethod
    def _rebooted(self, rt: PodRt) -> None: ...

    # -- health ------------------------------------------------------------------------
    def on_health(self, dev: DevKey, fault: Fault) -> None:
        """Device health changed: report it, and kill containers on a crashing fault."""
        self.resync(dev)
        for key in self._claims.pods_using(dev):
            rt = self.pods.get(key)
            if rt is None:
                continue
            if fault.health == "Unhealthy" and fault.crash:
                for c in rt.containers:
                    if c.state == "running" and any(d == dev for _, _, d in rt.container_devices(c)):
                        self._timers.call_later(self._t.crash_after_s, self._crasher(rt, c, c.gen))

    def on_plugin_health(self, dev: PluginDevice) -> None:
        """A device plugin's device changed health: the pods holding it report it at the next sync."""
        holders = set(self._plugin_devices.holders(dev))
        self._dirty.update(k for k, rt in self.pods.items() if rt.uid in holders)
        if self._dirty:
            self._report.kick()

    def resync(self, dev: DevKey) -> None:
        """Sync the pods using ``dev`` (their status is written again), as the kubelet's periodic sync does."""
        self._dirty.update(k for k in self._claims.pods_using(dev) if k in self.pods)
        if self._dirty:
            self._report.kick()

    def _reset_transient(self, rt: PodRt, devs: list[tuple[str, str, DevKey]]) -> None:
        """A restart resets the GPU: faults marked ``clears_on_restart`` heal."""
        for _, _, dev in devs:
            fault = self._devices.fault(dev)
            if fault.clears_on_restart and fault.health != "Healthy" and self._devices.exists(dev):
                self._devices.set_health(dev, Fault())

    def _flush_reports(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            rt = self.pods.get(key)
            if rt is not None:
                self._write(rt)

    # -- helpers -----------------------------------------------------------------------
    def _write(self, rt: PodRt) -> None:
        if rt.gone or rt.node in self.down_nodes:
            return
        try:
            self._store.mutate(
                "pods", rt.key[0], rt.key[1], lambda p: render_status(p, rt, self._devices, self._config.plugins,
                                                          self._plugin_devices.status,
                                                          self._config.gate("ResourceHealthStatus"))
            )
        except NotFound:
            self._forget(rt)

    def _event(self, rt: PodRt, reason: str, message: str, *, warning: bool = False) -> None:
        pod = self._store.find("pods", *rt.key)
        if pod is not None:
            self._recorder.event(pod, reason, message, type_="Warning" if warning else "Normal", host=rt.node)
