"""ResourceClaims: creation from templates, and the allocation book the scheduler reads.

The book is rebuilt from claim objects as they change (store listener), so the store stays
the single source of truth: a claim deleted or deallocated through the API frees its
devices exactly as one released by the simulated kubelet.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.devices import DevKey
from podmedic_sim.store import NotFound, Store, WatchEvent

PodKey = tuple[str, str]
ClaimKey = tuple[str, str]
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of Kubernetes' generated names
_DRIVER_CEL = re.compile(r'device\.driver\s*==\s*["\']([^"\']+)["\']')


def random_suffix(rng: random.Random, n: int = 5) -> str:
    """Random name suffix like the API server's ``generateName``."""
    return "".join(rng.choice(_SUFFIX_CHARS) for _ in range(n))


@dataclass
class Request:
    """One exact device request of a claim."""

    name: str
    device_class: str
    count: int
    all_devices: bool
    tolerations: list[dict[str, Any]] = field(default_factory=list)


def claim_requests(claim: Obj) -> list[Request]:
    """The requests of a claim spec (v1 ``exactly`` form, or the older flat form)."""
    out = []
    for req in claim.get("spec", {}).get("devices", {}).get("requests", []) or []:
        exact = req.get("exactly") or req
        out.append(
            Request(
                name=req.get("name", ""),
                device_class=exact.get("deviceClassName", ""),
                count=int(exact.get("count") or 1),
                all_devices=exact.get("allocationMode") == "All",
                tolerations=list(exact.get("tolerations") or []),
            )
        )
    return out


class ClaimBook:
    """Which device is allocated to which claim, and which pods a claim is reserved for."""

    def __init__(self, store: Store, rng: random.Random) -> None:
        self._store = store
        self._rng = rng
        self.owner: dict[DevKey, ClaimKey] = {}
        self.claim_devices: dict[ClaimKey, list[tuple[str, DevKey]]] = {}
        self.claim_pods: dict[ClaimKey, set[PodKey]] = {}
        self.pool_used: dict[tuple[str, str], int] = {}

    # -- index -------------------------------------------------------------------------
    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: re-index a claim whenever it changes."""
        if ev.resource != "resourceclaims":
            return
        meta = ev.obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        for _, dev in self.claim_devices.pop(key, []):
            if self.owner.get(dev) == key:
                del self.owner[dev]
                self.pool_used[dev[:2]] = self.pool_used.get(dev[:2], 1) - 1
        self.claim_pods.pop(key, None)
        if ev.type == "DELETED":
            return
        status = ev.obj.get("status", {}) or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        devs = [(r.get("request", ""), (r["driver"], r["pool"], r["device"])) for r in results]
        if devs:
            self.claim_devices[key] = devs
            for _, dev in devs:
                self.owner[dev] = key
                self.pool_used[dev[:2]] = self.pool_used.get(dev[:2], 0) + 1
        pods = {
            (key[0], r["name"])
            for r in status.get("reservedFor", []) or []
            if r.get("resource") == "pods"
        }
        if pods:
            self.claim_pods[key] = pods

    def driver_of_class(self, class_name: str) -> str:
        """The driver a DeviceClass selects (its CEL ``device.driver == ...``), else its name."""
        cls = self._store.find("deviceclasses", None, class_name)
        for sel in (cls or {}).get("spec", {}).get("selectors", []) or []:
            m = _DRIVER_CEL.search((sel.get("cel") or {}).get("expression", ""))
            if m:
                return m.group(1)
        return class_name

    # -- pods and their claims -----------------------------------------------------------
    def pod_claim_keys(self, pod: Obj) -> list[tuple[str, ClaimKey | None]]:
        """Each ``spec.resourceClaims`` entry: (name in pod, claim key or None if not created)."""
        ns = pod["metadata"].get("namespace", "default")
        generated = {
            s["name"]: s.get("resourceClaimName")
            for s in pod.get("status", {}).get("resourceClaimStatuses", []) or []
        }
        out: list[tuple[str, ClaimKey | None]] = []
        for ref in pod.get("spec", {}).get("resourceClaims", []) or []:
            name = ref.get("resourceClaimName") or generated.get(ref["name"])
            out.append((ref["name"], (ns, name) if name else None))
        return out

    def ensure_pod_claims(self, pod: Obj) -> tuple[Obj, list[Obj]] | str:
        """Create the pod's claims from templates (resourceclaim controller); returns the
        possibly updated pod and its claims, or an error message when one is missing."""
        ns, pod_name = pod["metadata"].get("namespace", "default"), pod["metadata"]["name"]
        claims: list[Obj] = []
        statuses: list[dict[str, str]] = []
        created = False
        generated = dict(self.pod_claim_keys(pod))
        for ref in pod.get("spec", {}).get("resourceClaims", []) or []:
            if ref.get("resourceClaimName"):
                claim = self._store.find("resourceclaims", ns, ref["resourceClaimName"])
                if claim is None:
                    return f'resourceclaim "{ref["resourceClaimName"]}" not found'
                claims.append(claim)
                continue
            tmpl_name = ref.get("resourceClaimTemplateName")
            if not tmpl_name:
                continue
            existing = generated.get(ref["name"])
            claim = self._store.find("resourceclaims", ns, existing[1]) if existing else None
            if claim is None:
                tmpl = self._store.find("resourceclaimtemplates", ns, tmpl_name)
                if tmpl is None:
                    return f'resourceclaimtemplate "{tmpl_name}" not found'
                claim = self._store.create(
                    "resourceclaims",
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaim",
                        "metadata": {
                            "name": f"{pod_name}-{ref['name']}-{random_suffix(self._rng)}",
                            "namespace": ns,
                            "annotations": {POD_CLAIM_ANNOTATION: ref["name"]},
                            "labels": dict(
                                tmpl.get("spec", {}).get("metadata", {}).get("labels", {}) or {}
                            ),
                            "ownerReferences": [
                                {
                                    "apiVersion": "v1",
                                    "kind": "Pod",
                                    "name": pod_name,
                                    "uid": pod["metadata"]["uid"],
                                    "controller": True,
                                    "blockOwnerDeletion": True,
                                }
                            ],
                        },
                        "spec": dict(tmpl.get("spec", {}).get("spec", {})),
                    },
                )
                created = True
            statuses.append({"name": ref["name"], "resourceClaimName": claim["metadata"]["name"]})
            claims.append(claim)
        if created:

            def set_statuses(p: Obj) -> None:
                p.setdefault("status", {})["resourceClaimStatuses"] = statuses

            pod = self._store.mutate("pods", ns, pod_name, set_statuses)
        return pod, claims

    def pod_devices(self, pod: Obj) -> list[tuple[str, str, DevKey]]:
        """(claim name, request, device) for each device allocated to the pod's claims."""
        out = []
        for _, key in self.pod_claim_keys(pod):
            if key is None:
                continue
            for request, dev in self.claim_devices.get(key, []):
                out.append((key[1], request, dev))
        return out

    def pods_using(self, dev: DevKey) -> set[PodKey]:
        """Pods a device's claim is reserved for."""
        key = self.owner.get(dev)
        return set(self.claim_pods.get(key, ())) if key else set()

    def allocate(self, claim: Obj, results: list[dict[str, str]], node: str, pod: Obj) -> Obj:
        """Write an allocation (unless the claim has one) and reserve the claim for the pod."""

        def edit(c: Obj) -> None:
            status = c.setdefault("status", {})
            if not status.get("allocation"):
                status["allocation"] = {
                    "devices": {"results": results},
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    },
                }
            reserved = [
                r
                for r in status.get("reservedFor", []) or []
                if r.get("uid") != pod["metadata"]["uid"]
            ]
            reserved.append(
                {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
            )
            status["reservedFor"] = reserved

        meta = claim["metadata"]
        return self._store.mutate("resourceclaims", meta.get("namespace"), meta["name"], edit)

    def release_pod(self, pod: Obj, *, delete_generated: bool) -> None:
        """Drop the pod from its claims' reservedFor, deallocating claims nobody uses; delete
        the claims generated for it when the pod is gone (garbage collection)."""
        uid = pod["metadata"].get("uid")
        for _, key in self.pod_claim_keys(pod):
            if key is None:
                continue
            claim = self._store.find("resourceclaims", key[0], key[1])
            if claim is None:
                continue
            owned = any(
                o.get("uid") == uid for o in claim["metadata"].get("ownerReferences", []) or []
            )
            try:
                if owned and delete_generated:
                    self._store.delete("resourceclaims", key[0], key[1])
                    continue

                def edit(c: Obj) -> None:
                    status = c.setdefault("status", {})
                    reserved = [
                        r for r in status.get("reservedFor", []) or [] if r.get("uid") != uid
                    ]
                    if reserved:
                        status["reservedFor"] = reserved
                    else:
                        status.pop("reservedFor", None)
                        status.pop("allocation", None)

                self._store.mutate("resourceclaims", key[0], key[1], edit)
            except NotFound:
                continue
