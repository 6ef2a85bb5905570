"""Detect stage: which pods use the device, and how healthy the cluster says it is."""

from __future__ import annotations

from temporalio import activity

from activities.base import KubeActivities
from activities.claim_cache import ReservedClaims
from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceRef, Health, PodKey
from podmedic.domain.steps import DeviceHealthReading, DeviceInput, DiscoverInput, Discovery
from podmedic.kube import podview
from podmedic.kube.gateway import KubeGateway


class DiscoverActivities(KubeActivities):
    """Read-only activities: safe to retry any number of times."""

    def __init__(self, kube: KubeGateway) -> None:
        super().__init__(kube)
        self.claims = ReservedClaims(kube.get_claim)

    def _pods_on(self, device: DeviceRef, reported_by: list[PodKey] | None = None) -> list[Obj]:
        """Pods whose claims hold the device, plus pods that reported it (their claim may
        already be released: a pod that failed on the device is still affected)."""
        pods: list[Obj] = []
        for key in reported_by or []:
            pod = self.kube.get_pod(key.namespace, key.name)
            if pod is not None and (not key.uid or pod["metadata"].get("uid") == key.uid):
                pods.append(pod)
        node = self._pool_node(device)
        pods += self._holders_on_node(device, node) if node else self._holders_anywhere(device)
        unique = {p["metadata"].get("uid"): p for p in pods}
        return list(unique.values())

    def _pool_node(self, device: DeviceRef) -> str | None:
        """The node a node-local pool belongs to (its ResourceSlice's ``spec.nodeName``), else None."""
        for rslice in self.kube.list_slices(f"spec.driver={device.driver},spec.pool.name={device.pool}"):
            node = (rslice.get("spec") or {}).get("nodeName")
            if node:
                return str(node)
        return None

    def _holders_on_node(self, device: DeviceRef, node: str) -> list[Obj]:
        """Pods on ``node`` whose claims hold the device: the node's pods and their few claims,
        not every claim of the cluster (that list made each discover and each health read
        O(cluster size): half the worker's CPU with 1,000 incidents open, py-spy)."""
        found: list[Obj] = []
        for pod in self.kube.list_pods_on_node(node):
            meta = pod["metadata"]
            for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
                name = status.get("resourceClaimName")
                claim = self.claims.claim_of(pod, name) if name else None
                if claim is None or not podview.claim_uses_device(claim, device):
                    continue
                if any(uid in ("", meta.get("uid")) for ns, pname, uid in podview.pods_of_claim(claim)
                       if pname == meta["name"]):
                    found.append(pod)
                    break
        return found

    def _holders_anywhere(self, device: DeviceRef) -> list[Obj]:
        """Pods holding a device of a pool that is not one node's (network-attached): every claim."""
        found: list[Obj] = []
        for claim in self.kube.list_claims():
            if not podview.claim_uses_device(claim, device):
                continue
            for ns, name, uid in podview.pods_of_claim(claim):
                pod = self.kube.get_pod(ns, name)
                if pod is not None and (not uid or pod["metadata"].get("uid") == uid):
                    found.append(pod)
        return found

    def _driver_taints(self, device: DeviceRef) -> list[Obj]:
        """Taints the driver itself put on the device in its ResourceSlice (not podmedic's)."""
        # Only the device's own pool: listing every slice made each incident O(cluster size).
        for rslice in self.kube.list_slices(f"spec.driver={device.driver},spec.pool.name={device.pool}"):
            spec = rslice.get("spec") or {}
            if spec.get("driver") != device.driver or (spec.get("pool") or {}).get("name") != device.pool:
                continue
            for dev in spec.get("devices") or []:
                if dev.get("name") == device.device:
                    return [t for t in dev.get("taints") or [] if not str(t.get("key", "")).startswith("podmedic.io/")]
        return []

    def _reading(self, device: DeviceRef, pods: list[Obj]) -> DeviceHealthReading:
        for pod in pods:
            status = self.claims.device_health(pod).of(device)
            if status is not None:
                health, message = status
                return DeviceHealthReading(
                    health=health, message=message, source=f"pod {pod['metadata']['name']} allocatedResourcesStatus"
                )
        taints = self._driver_taints(device)
        if taints:
            text = ", ".join(f"{t.get('key')}={t.get('value', '')}" for t in taints)
            return DeviceHealthReading(health=Health.UNHEALTHY, message=text, source="ResourceSlice taints")
        return DeviceHealthReading(health=Health.UNKNOWN, message="no pod reports this device", source="")

    def _job_siblings(self, pods: list[Obj]) -> list[Obj]:
        """The other live pods of the affected pods' Jobs: a synchronous job saves together."""
        known = {p["metadata"].get("uid") for p in pods}
        siblings: list[Obj] = []
        jobs = {(p["metadata"].get("namespace", ""), job) for p in pods if (job := podview.job_name(p))}
        for namespace, job in sorted(jobs):
            for pod in self.kube.list_pods(namespace, f"{podview.JOB_NAME_LABEL}={job}"):
                meta = pod["metadata"]
                phase = (pod.get("status") or {}).get("phase", "")
                if meta.get("uid") in known or meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
                    continue
                if podview.job_name(pod) == job:
                    known.add(meta.get("uid"))
                    siblings.append(pod)
        return siblings

    def _discover(self, device: DeviceRef, reported_by: list[PodKey]) -> Discovery:
        pods = self._pods_on(device, reported_by)
        nodes = {p.get("spec", {}).get("nodeName") for p in pods} - {None}
        return Discovery(
            node=next(iter(nodes)) if len(nodes) == 1 else None,
            pods=[podview.pod_ref(p) for p in pods],
            reading=self._reading(device, pods),
            job_pods=[podview.pod_ref(p) for p in self._job_siblings(pods)],
        )

    @activity.defn(name="discover_device")
    async def discover_device(self, inp: DiscoverInput) -> Discovery:
        """Pods on the device (via ResourceClaim allocations) and its health now."""
        return await self.run(self._discover, inp.device, inp.reported_by)

    @activity.defn(name="read_device_health")
    async def read_device_health(self, inp: DeviceInput) -> DeviceHealthReading:
        """The device's health from pods' allocatedResourcesStatus, else driver taints."""
        return await self.run(lambda: self._reading(inp.device, self._pods_on(inp.device)))
