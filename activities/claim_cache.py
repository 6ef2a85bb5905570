"""ResourceClaims read once while they are reserved: the claim GETs of discovery and health reads.

Every discover and every health read looks at each claim of each pod on the device's node: a
GET per claim per read, thousands in a storm, a share of the worker's CPU and as much again of
the API server's (docs/BENCHMARKS.md).

A claim's allocation cannot change while the claim is reserved for a pod: the scheduler
allocates before it reserves, and a claim is deallocated only once ``reservedFor`` is empty
(KEP-4381). So a claim read while reserved for pod P still answers for P while P runs. Each
use checks that the cached claim names P's uid among its reservations (a pod recreated under
the same name has a new uid and reads the claim again) and that P has not finished; anything
else is read from the API server, as before. The worker's ``fetch`` answers from a watch of
every claim when it can (``podmedic/kube/object_cache.py``); a watched claim not yet reserved
for a running pod may only be behind the watch of its pod, so it is read once more, fresh.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from podmedic.domain.base import Obj
from podmedic.kube.resource_ids import PodDeviceHealth, claims_read, pod_device_health

MAX_CLAIMS = 20_000
"""Claims kept (least recently used dropped first): about 1 KiB each, so at most ~20 MiB."""

FINISHED = ("Succeeded", "Failed")


def _reserved_uids(claim: Obj) -> set[str]:
    return {str(r.get("uid")) for r in (claim.get("status") or {}).get("reservedFor") or [] if r.get("uid")}


def _kept(claim: Obj) -> Obj:
    """What discovery reads of a claim (its identity, allocation and reservations), not the whole object."""
    meta, status = claim.get("metadata") or {}, claim.get("status") or {}
    return {"metadata": {k: meta.get(k) for k in ("namespace", "name", "uid")},
            "status": {"allocation": status.get("allocation"), "reservedFor": status.get("reservedFor")}}


class ClaimFetch(Protocol):
    """``LoopCalls.get_claim``: a claim by namespace and name, from the API server when ``fresh``."""

    async def __call__(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None: ...


class ReservedClaims:
    """A pod's claims by name, from memory while the claim is reserved for that pod (the activities'
    event loop is its one user)."""

    def __init__(self, fetch: ClaimFetch, max_claims: int = MAX_CLAIMS) -> None:
        self._fetch = fetch
        self._max = max_claims
        self._claims: OrderedDict[tuple[str, str], Obj] = OrderedDict()
        self.hits = 0
        self.reads = 0

    async def claim_of(self, pod: Obj, claim_name: str) -> Obj | None:
        """The claim ``claim_name`` of ``pod`` (its namespace); ``None`` when it is gone."""
        meta = pod.get("metadata") or {}
        key, uid = (str(meta.get("namespace", "")), claim_name), str(meta.get("uid") or "")
        running = bool(uid) and (pod.get("status") or {}).get("phase") not in FINISHED
        if running:
            cached = self._claims.get(key)
            if cached is not None and uid in _reserved_uids(cached):
                self._claims.move_to_end(key)
                self.hits += 1
                return cached
        claim = await self._fetch(*key)
        if running and claim is not None and uid not in _reserved_uids(claim):
            claim = await self._fetch(*key, fresh=True)
        self.reads += 1
        if claim is not None and running and uid in _reserved_uids(claim):
            self._claims[key] = _kept(claim)
            self._claims.move_to_end(key)
            while len(self._claims) > self._max:
                self._claims.popitem(last=False)
        else:
            self._claims.pop(key, None)
        return claim

    async def device_health(self, pod: Obj) -> PodDeviceHealth:
        """The pod's reported device health resolved to DRA devices through its claims (the kubelet
        names a device by the driver's CDI ID when it has one: ``podmedic.kube.resource_ids``)."""
        claims = {name: await self.claim_of(pod, name) for name in claims_read(pod)}
        return pod_device_health(pod, claims.get)

    def __len__(self) -> int:
        return len(self._claims)
