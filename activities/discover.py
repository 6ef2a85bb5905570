"""Detect stage: which pods use the device, and how healthy the cluster says it is."""

from __future__ import annotations

import datetime as dt

from temporalio import activity

from activities.base import KubeActivities
from activities.claim_cache import FINISHED, ReservedClaims
from podmedic.domain import workloads
from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceRef, Health, PodKey
from podmedic.domain.steps import DeviceHealthReading, DeviceInput, DiscoverInput, Discovery
from podmedic.domain.workloads import WorkloadRef
from podmedic.kube import podview
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.resource_ids import claim_object_names

ENDED_BEFORE_EVENT = dt.timedelta(minutes=10)
"""How long before an incident's first event a pod may have ended and still count as killed by its
fault: a health stream reports a device late (the kubelet marks a silent one Unknown only after the
driver's health timeout), never by more than minutes."""


class DiscoverActivities(KubeActivities):
    """Read-only activities: safe to retry any number of times (with a current pod cache and known
    claims, a discovery sends no request)."""

    def __init__(self, kube: KubeGateway, claims: ReservedClaims | None = None) -> None:
        super().__init__(kube)
        self.claims = claims if claims is not None else ReservedClaims(self.api.get_claim)

    async def _pods_on(self, device: DeviceRef, reported_by: list[PodKey] | None = None,
                 ended_since: dt.datetime | None = None) -> list[Obj]:
        """Pods whose claims hold the device, plus pods that reported it (their claim may
        already be released: a pod that failed on the device is still affected); with
        ``ended_since``, also the node's pods that ended on the device since then."""
        pods: list[Obj] = []
        for key in reported_by or []:
            pod = await self.api.get_pod(key.namespace, key.name)
            if pod is not None and (not key.uid or pod["metadata"].get("uid") == key.uid):
                pods.append(pod)
        node = await self.api.pool_node(device.driver, device.pool)
        if node:
            pods += await self._holders_on_node(device, node, ended_since)
        else:
            pods += await self._holders_anywhere(device)
        unique = {p["metadata"].get("uid"): p for p in pods}
        return list(unique.values())

    async def _holders_on_node(self, device: DeviceRef, node: str, ended_since: dt.datetime | None) -> list[Obj]:
        """Pods on ``node`` whose claims hold the device: the node's pods and their few claims,
        not every claim of the cluster (that list made each discover and each health read
        O(cluster size), the worker's largest cost with many incidents open)."""
        pods = await self.api.list_pods_on_node(node)
        holders = [pod for pod in pods if await self._holds(pod, device)]
        if ended_since is None:
            return holders
        held = {pod["metadata"].get("uid") for pod in holders}
        ended = [pod for pod in pods if pod["metadata"].get("uid") not in held
                 and await self._ended_on(pod, device, ended_since)]
        return holders + self._this_allocation(ended, holders)

    @staticmethod
    def _this_allocation(ended: list[Obj], holders: list[Obj]) -> list[Obj]:
        """The pods that ended on the device in its present allocation: a Job's failed pods stay
        until the Job goes, and the device may have gone to another claim since. With pods holding
        it now, those sharing one of their claims; else those that ended after the last of them
        started (times are to the second: a start in the second a pod ended counts as after it)."""
        if holders:
            held = {(p["metadata"].get("namespace"), name) for p in holders for name in claim_object_names(p)}
            return [p for p in ended
                    if any((p["metadata"].get("namespace"), name) in held for name in claim_object_names(p))]
        latest = max((when for p in ended if (when := podview.started_at(p))), default=None)
        if latest is None:
            return ended
        return [p for p in ended if podview.started_at(p) == latest
                or (end := podview.ended_at(p)) is None or end > latest]

    async def _holds(self, pod: Obj, device: DeviceRef) -> bool:
        """One of the pod's claims has the device allocated and is reserved for this pod."""
        meta = pod["metadata"]
        for name in claim_object_names(pod):
            claim = await self.claims.claim_of(pod, name)
            if claim is None or not podview.claim_uses_device(claim, device):
                continue
            if any(uid in ("", meta.get("uid")) for ns, pname, uid in podview.pods_of_claim(claim)
                   if pname == meta["name"]):
                return True
        return False

    async def _ended_on(self, pod: Obj, device: DeviceRef, since: dt.datetime) -> bool:
        """A pod that ended on the device since ``since``, its status still naming the device not
        Healthy. A fault that kills the pod (an XID 79 aborts CUDA) can end it before discovery
        runs; the resourceclaim controller then takes it out of ``reservedFor`` and the claim is
        deallocated (KEP-4381), so only the pod's ``allocatedResourcesStatus`` (KEP-4680) still
        ties it to the device. A pod that ended long before, or reporting the device Healthy,
        ended for another reason. Running pods are found by their claims."""
        status = pod.get("status") or {}
        if status.get("phase") not in FINISHED:
            return False
        ended = podview.ended_at(pod)
        if ended is not None and ended < since:
            return False
        reported = (await self.claims.device_health(pod)).of(device)
        return reported is not None and reported[0] is not Health.HEALTHY

    async def _holders_anywhere(self, device: DeviceRef) -> list[Obj]:
        """Pods holding a device of a pool that is not one node's (network-attached): every claim."""
        found: list[Obj] = []
        for claim in await self.api.list_claims():
            if not podview.claim_uses_device(claim, device):
                continue
            for ns, name, uid in podview.pods_of_claim(claim):
                pod = await self.api.get_pod(ns, name)
                if pod is not None and (not uid or pod["metadata"].get("uid") == uid):
                    found.append(pod)
        return found

    async def _driver_taints(self, device: DeviceRef) -> list[Obj]:
        """Taints the driver itself put on the device in its ResourceSlice (not podmedic's)."""
        # Only the device's own pool: listing every slice made each incident O(cluster size).
        for rslice in await self.api.pool_slices(device.driver, device.pool):
            spec = rslice.get("spec") or {}
            if spec.get("driver") != device.driver or (spec.get("pool") or {}).get("name") != device.pool:
                continue
            for dev in spec.get("devices") or []:
                if dev.get("name") == device.device:
                    return [t for t in dev.get("taints") or [] if not str(t.get("key", "")).startswith("podmedic.io/")]
        return []

    async def _reading(self, device: DeviceRef, pods: list[Obj]) -> DeviceHealthReading:
        for pod in pods:
            status = (await self.claims.device_health(pod)).of(device)
            if status is not None:
                health, message = status
                return DeviceHealthReading(
                    health=health, message=message, source=f"pod {pod['metadata']['name']} allocatedResourcesStatus"
                )
        taints = await self._driver_taints(device)
        if taints:
            text = ", ".join(f"{t.get('key')}={t.get('value', '')}" for t in taints)
            return DeviceHealthReading(health=Health.UNHEALTHY, message=text, source="ResourceSlice taints")
        return DeviceHealthReading(health=Health.UNKNOWN, message="no pod reports this device", source="")

    async def _workload(self, pod: Obj) -> WorkloadRef | None:
        """The top workload above ``pod``, walking controller ownerReferences while the kind is known
        (``podmedic/domain/workloads.py``); None for a bare pod. An owner of a kind podmedic does not
        know ends the walk below it, and says so in ``how``."""
        meta = pod["metadata"]
        namespace, chain, top, unknown = meta.get("namespace", ""), [], None, ""
        current = pod
        for _ in range(workloads.MAX_DEPTH):
            ref = workloads.controller_of(current)
            if ref is None:
                break
            kind = workloads.known_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if kind is None:
                unknown = f"{ref.get('kind')} {ref.get('name')} ({ref.get('apiVersion')})"
                break
            if kind.kind == "Job" and workloads.JOBSET_LABEL not in (meta.get("labels") or {}):
                # A Job of no JobSet (its pods would carry the JobSet's label): the reference says all we use.
                chain.append(f"Job {ref.get('name')}")
                top = {"apiVersion": ref["apiVersion"], "kind": "Job", "metadata": {"name": ref.get("name", "")}}
                break
            owner = await self.api.get_owner(str(ref["apiVersion"]), kind.plural, namespace, str(ref.get("name", "")))
            if owner is None:
                break
            chain.append(f"{ref.get('kind')} {ref.get('name')}")
            current = owner
            if kind.kind != "Pod":
                top = owner
        if top is None:
            return None if not unknown else WorkloadRef(
                kind="Pod", api_version="v1", namespace=namespace, name=meta["name"], chain=chain,
                how=f"owned by {unknown}, a kind podmedic does not know: handled as a bare pod")
        found = workloads.describe_top(top, namespace, chain, meta.get("labels") or {})
        if unknown:
            found.how += f"; above it {unknown}, a kind podmedic does not know"
        return found

    async def _siblings(self, pods: list[Obj], workload: WorkloadRef | None) -> list[Obj]:
        """The other live pods of the affected pods' workload (the JobSet, the LeaderWorkerSet group,
        the StatefulSet, the Job): a synchronous job saves together."""
        known = {p["metadata"].get("uid") for p in pods}
        siblings: list[Obj] = []
        if workload is not None and workload.pods_selector:
            groups = {(workload.namespace, workload.pods_selector)}
        else:
            groups = {(p["metadata"].get("namespace", ""), f"{podview.JOB_NAME_LABEL}={job}")
                      for p in pods if (job := podview.job_name(p))}
        for namespace, selector in sorted(groups):
            for pod in await self.api.list_pods(namespace, selector):
                meta = pod["metadata"]
                phase = (pod.get("status") or {}).get("phase", "")
                if meta.get("uid") in known or meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
                    continue
                known.add(meta.get("uid"))
                siblings.append(pod)
        return siblings

    async def _discover(self, device: DeviceRef, reported_by: list[PodKey],
                        first_event: dt.datetime | None) -> Discovery:
        since = first_event - ENDED_BEFORE_EVENT if first_event is not None else None
        pods = await self._pods_on(device, reported_by, ended_since=since)
        nodes = {p.get("spec", {}).get("nodeName") for p in pods} - {None}
        workload = await self._workload(pods[0]) if pods else None
        return Discovery(
            node=next(iter(nodes)) if len(nodes) == 1 else None,
            pods=[podview.pod_ref(p) for p in pods],
            reading=await self._reading(device, pods),
            job_pods=[podview.pod_ref(p) for p in await self._siblings(pods, workload)],
            workload=workload,
        )

    @activity.defn(name="discover_device")
    async def discover_device(self, inp: DiscoverInput) -> Discovery:
        """Pods on the device (via ResourceClaim allocations) and its health now."""
        return await self._discover(inp.device, inp.reported_by, inp.first_event)

    @activity.defn(name="read_device_health")
    async def read_device_health(self, inp: DeviceInput) -> DeviceHealthReading:
        """The device's health from pods' allocatedResourcesStatus, else driver taints."""
        return await self._reading(inp.device, await self._pods_on(inp.device))
