"""Extended resources served by device plugins (``nvidia.com/gpu``), as the kubelet's device manager keeps them.

What the real kubelet does (kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go):

- ``GetCapacity``: a resource's node capacity counts every device the plugin listed, healthy or
  not; its allocatable counts only the healthy ones. So an Unhealthy device leaves the node's
  allocatable and the scheduler stops counting it, without any taint.
- ``allocateContainerResources``: devices are allocated at pod admission, per container, from the
  container's ``resources.limits`` (extended resources cannot be overcommitted, so requests equal
  limits), among healthy devices not in use. Too few: the pod fails admission with
  ``UnexpectedAdmissionError``. A container restart keeps the pod's devices.
- ``UpdateAllocatedResourcesStatus`` (KEP-4680): per container, one ``allocatedResourcesStatus``
  entry named after the resource (``nvidia.com/gpu``, no ``claim:`` prefix), one element per
  device ID, health ``Healthy`` or, for anything else the plugin said, ``Unhealthy`` (never
  Unknown, and no message).

Device IDs are what NVIDIA's device plugin lists: GPU UUIDs (``GPU-<uuid>``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.store import NotFound, Store

PluginDevice = tuple[str, str, str]  # (node, resource, device ID)
Assigned = dict[str, dict[str, list[str]]]  # container -> resource -> device IDs


def device_id(node: str, resource: str, index: int) -> str:
    """The stable ID a plugin lists for device ``index`` of ``resource`` on ``node``: a GPU UUID."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{node}/{resource}/{index}')}"


def container_limits(container: Obj, resources: set[str]) -> dict[str, int]:
    """The extended resources (of ``resources``) a container asks for, from its limits."""
    limits = (container.get("resources") or {}).get("limits") or {}
    wanted: dict[str, int] = {}
    for name, amount in limits.items():
        if name in resources:
            wanted[name] = int(str(amount))
    return wanted


class PluginDevices:
    """Every node's device-plugin devices: their health, and which pod's container holds which."""

    def __init__(self, store: Store, per_node: dict[str, int]) -> None:
        self._store = store
        self.per_node = dict(per_node)
        self.unhealthy: set[PluginDevice] = set()
        self.assigned: dict[str, Assigned] = {}  # pod UID -> what its containers hold
        self.node_of: dict[str, str] = {}  # pod UID -> its node
        self.listeners: list[Callable[[PluginDevice], None]] = []

    def ids(self, node: str, resource: str) -> list[str]:
        """The devices the plugin lists on ``node`` (every node of the cluster has them)."""
        return [device_id(node, resource, i) for i in range(self.per_node.get(resource, 0))]

    def node_resources(self, node: str) -> tuple[dict[str, str], dict[str, str]]:
        """``(capacity, allocatable)`` of the node's extended resources, as node status shows them."""
        capacity = {r: str(n) for r, n in self.per_node.items()}
        allocatable = {r: str(n - sum(1 for (nd, res, _) in self.unhealthy if nd == node and res == r))
                       for r, n in self.per_node.items()}
        return capacity, allocatable

    def in_use(self, node: str, resource: str) -> set[str]:
        """Device IDs of ``resource`` held by pods on ``node``."""
        return {d for uid, held in self.assigned.items() if self.node_of.get(uid) == node
                for per in held.values() for d in per.get(resource, [])}

    def fits(self, pod: Obj, node: str) -> str | None:
        """The scheduler's NodeResourcesFit for the extended resources: ``Insufficient <resource>``
        when the pod asks for more than the node's allocatable minus what pods there hold."""
        _, allocatable = self.node_resources(node)
        for resource, wanted in self._pod_limits(pod).items():
            if wanted + len(self.in_use(node, resource)) > int(allocatable.get(resource, "0")):
                return f"Insufficient {resource}"
        return None

    def admit(self, pod: Obj, node: str) -> str | None:
        """Allocate the pod's devices on ``node``; the admission error when there are too few."""
        uid = str(pod["metadata"]["uid"])
        if uid in self.assigned:
            return None
        held: Assigned = {}
        taken: dict[str, set[str]] = {}
        for c in (pod.get("spec") or {}).get("containers") or []:
            for resource, wanted in container_limits(c, set(self.per_node)).items():
                busy = taken.setdefault(resource, self.in_use(node, resource))
                free = [d for d in self.ids(node, resource)
                        if d not in busy and (node, resource, d) not in self.unhealthy]
                if len(free) < wanted:
                    return (f"Allocate failed due to requested number of devices unavailable for {resource}. "
                            f"Requested: {wanted}, Available: {len(free)}, which is unexpected")
                held.setdefault(c["name"], {})[resource] = free[:wanted]
                busy.update(free[:wanted])
        if held:
            self.assigned[uid] = held
            self.node_of[uid] = node
        return None

    def release(self, uid: str) -> None:
        """The pod ended or is gone: its devices are free again."""
        self.assigned.pop(uid, None)
        self.node_of.pop(uid, None)

    def set_health(self, node: str, resource: str, device: str, health: str) -> None:
        """The plugin reports ``device`` ``Healthy`` or ``Unhealthy``; ``KeyError`` when it lists no such device."""
        if device not in self.ids(node, resource) or self._store.find("nodes", None, node) is None:
            raise KeyError(f"node {node} has no {resource} device {device}")
        key = (node, resource, device)
        before = key in self.unhealthy
        if health == "Healthy":
            self.unhealthy.discard(key)
        else:
            self.unhealthy.add(key)
        if before == (key in self.unhealthy):
            return
        capacity, allocatable = self.node_resources(node)

        def edit(n: Obj) -> None:
            status = n.setdefault("status", {})
            status.setdefault("capacity", {}).update(capacity)
            status.setdefault("allocatable", {}).update(allocatable)

        with contextlib.suppress(NotFound):  # a node deleted meanwhile has no status to keep
            self._store.mutate("nodes", None, node, edit)
        for listener in list(self.listeners):
            listener(key)

    def holders(self, key: PluginDevice) -> list[str]:
        """UIDs of the pods holding the device."""
        node, resource, device = key
        return [uid for uid, held in self.assigned.items() if self.node_of.get(uid) == node
                and any(device in per.get(resource, []) for per in held.values())]

    def status(self, uid: str, container: str) -> list[dict[str, Any]]:
        """The container's ``allocatedResourcesStatus`` entries for its extended resources."""
        node = self.node_of.get(uid, "")
        out: list[dict[str, Any]] = []
        for resource, devices in sorted((self.assigned.get(uid) or {}).get(container, {}).items()):
            out.append({"name": resource, "resources": [
                {"resourceID": d, "health": "Unhealthy" if (node, resource, d) in self.unhealthy else "Healthy"}
                for d in devices]})
        return out

    def _pod_limits(self, pod: Obj) -> dict[str, int]:
        total: dict[str, int] = {}
        for c in (pod.get("spec") or {}).get("containers") or []:
            for resource, wanted in container_limits(c, set(self.per_node)).items():
                total[resource] = total.get(resource, 0) + wanted
        return total
