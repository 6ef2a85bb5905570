"""ResourceClaims kept in memory from a watch, for resolving pods' resourceIDs to devices.

The kubelet names a device in pod status by its CDI ID whenever the driver gave one
(``podmedic.kube.resource_ids``), so pod-status detection looks the device up in the pod's
claim. The index keeps each claim's allocation from a watch of ResourceClaims, not a GET per
event; a claim the watch has not delivered yet (the two watches are not ordered) is read once
and kept. The index is rebuilt from a full list at every start: it saves no cursor, because a
resumed watch would deliver only the claims that changed since.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from podmedic.domain.base import Obj
from podmedic.kube.gateway import KubeError, KubeGateway
from workers.ingest.sources.watch_loop import Change, ClusterSource

ClaimKey = tuple[str, str]  # (namespace, name)


def _kept(claim: Obj) -> Obj:
    """What resolution needs of a claim: its identity and allocation (not its spec)."""
    meta = claim.get("metadata") or {}
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid")},
            "status": {"allocation": {"devices": allocation.get("devices") or {}}}}


class ClaimIndex:
    """Claims by namespace and name, shared by the claim watch and the pod-status source."""

    def __init__(self, fetch: Callable[[str, str], Obj | None] | None = None) -> None:
        self._claims: dict[ClaimKey, Obj] = {}
        self._lock = threading.Lock()
        self._fetch = fetch
        self.fetched = 0  # claims read with a GET because the watch had not delivered them

    def put(self, claim: Obj) -> None:
        """Keep (or replace) a claim. A claim deallocated after its pod ended keeps the allocation it
        had: the kubelet goes on reporting that pod's devices (its tombstoned claims), by CDI ID."""
        meta = claim.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        kept = _kept(claim)
        with self._lock:
            before = self._claims.get(key)
            if (before is not None and not kept["status"]["allocation"]["devices"]
                    and before["metadata"].get("uid") == kept["metadata"].get("uid")):
                kept["status"] = before["status"]
            self._claims[key] = kept

    def drop(self, namespace: str, name: str) -> None:
        """Forget a deleted claim."""
        with self._lock:
            self._claims.pop((namespace, name), None)

    def keep_only(self, present: set[ClaimKey]) -> None:
        """After a relist: forget the claims that are gone."""
        with self._lock:
            for key in [k for k in self._claims if k not in present]:
                del self._claims[key]

    def get(self, namespace: str, name: str) -> Obj | None:
        """The claim, from the watch, else read once (allocated claims only are kept)."""
        with self._lock:
            found = self._claims.get((namespace, name))
        if found is not None or self._fetch is None:
            return found
        try:
            claim = self._fetch(namespace, name)
        except KubeError:
            return None
        self.fetched += 1
        if claim is not None and ((claim.get("status") or {}).get("allocation")):
            self.put(claim)
        return claim

    def __len__(self) -> int:
        with self._lock:
            return len(self._claims)


class ClaimSource(ClusterSource):
    """Feeds a ``ClaimIndex`` from a watch of every ResourceClaim; delivers no observations."""

    name = "resource-claims"
    kind = "resourceclaims"

    def __init__(self, kube: KubeGateway, index: ClaimIndex, *, watch_timeout_s: int = 30) -> None:
        self.index = index
        super().__init__(kube, state_dir=None, watch_timeout_s=watch_timeout_s)  # no cursor: lists at start

    def change(self, kind: str, obj: Obj) -> Change:
        """Keep the claim, or forget it when deleted."""
        meta = obj.get("metadata") or {}
        if kind == "DELETED":
            return Change(apply=lambda: self.index.drop(str(meta.get("namespace") or ""), str(meta.get("name"))))
        return Change(apply=lambda: self.index.put(obj))

    def missing(self, listed: list[Obj]) -> Change:
        """Claims deleted while the watch was away."""
        present = {(str((o.get("metadata") or {}).get("namespace") or ""), str((o.get("metadata") or {}).get("name")))
                   for o in listed}
        return Change(apply=lambda: self.index.keep_only(present))
