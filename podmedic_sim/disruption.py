"""The disruption controller: each PodDisruptionBudget's status, which the eviction subresource reads.

As kubernetes/kubernetes ``pkg/controller/disruption/disruption.go`` (``trySync``/``updatePdbStatus``):
the pods the PDB selects (not terminal, not being deleted) are expected; the Ready ones not listed in
``status.disruptedPods`` are currently healthy; desired healthy comes from ``minAvailable`` or
``maxUnavailable`` (a percentage rounds up); ``disruptionsAllowed`` is healthy minus desired, never
below 0; ``observedGeneration`` says which spec it was computed for, and the ``DisruptionAllowed``
condition says whether any is. An eviction records the pod in ``disruptedPods`` (eviction.go
``checkAndDecrement``); the controller forgets it once the pod is gone or after
``DeletionTimeout`` (2 minutes). Until the controller has synced a new or changed PDB, evictions of its
pods are refused (``observedGeneration < generation``: pkg/registry/core/pod/storage/eviction.go).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.parts import SimParts
from podmedic_sim.selectors import label_selector_object
from podmedic_sim.store import NotFound, Store, WatchEvent, now_rfc3339
from podmedic_sim.timers import Coalescer

DELETION_TIMEOUT_S = 120.0
SYNC_DELAY_S = 0.02


def is_ready(pod: Obj) -> bool:
    """Whether the pod's Ready condition is True (what a PDB counts as healthy)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent PDB field resolved against ``total`` (percentages round up)."""
    if isinstance(value, str) and value.endswith("%"):
        try:
            return math.ceil(int(value[:-1]) * total / 100)
        except ValueError:
            return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _fresh(disrupted: dict[str, str], now: dt.datetime, pods: set[str]) -> dict[str, str]:
    """The disrupted pods still counted: still there, and evicted less than ``DELETION_TIMEOUT_S`` ago."""
    kept = {}
    for name, stamp in disrupted.items():
        try:
            when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            continue
        if name in pods and (now - when).total_seconds() < DELETION_TIMEOUT_S:
            kept[name] = stamp
    return kept


def pdb_status(store: Store, pdb: Obj) -> Obj:
    """The status the controller writes for ``pdb`` now."""
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    select = label_selector_object(spec.get("selector"))
    pods = [p for p in store.iter("pods", pdb["metadata"].get("namespace")) if select(p)
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    disrupted = _fresh(status.get("disruptedPods") or {}, dt.datetime.now(dt.UTC),
                       {p["metadata"]["name"] for p in pods})
    expected = len(pods)
    healthy = sum(1 for p in pods if is_ready(p) and p["metadata"]["name"] not in disrupted)
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = 0
    allowed = max(0, healthy - desired)
    old = next((c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    condition = {"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                 "reason": "SufficientPods" if allowed > 0 else "InsufficientPods", "message": "",
                 "observedGeneration": pdb["metadata"].get("generation", 1),
                 "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == (
                     "True" if allowed > 0 else "False") else now_rfc3339()}
    return {"observedGeneration": pdb["metadata"].get("generation", 1), "disruptedPods": disrupted or None,
            "disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": desired,
            "expectedPods": expected, "conditions": [condition]}


class DisruptionController:
    """Keeps every PodDisruptionBudget's status current."""

    def __init__(self, parts: SimParts) -> None:
        self._store = parts.store
        self._pass = Coalescer(parts.timers, SYNC_DELAY_S, self.reconcile)

    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: a pod or a PDB changed (its own status writes aside)."""
        if ev.resource == "pods" or (ev.resource == "poddisruptionbudgets" and ev.type != "DELETED"):
            self._pass.kick()

    def reconcile(self) -> None:
        """Write each PDB's status where it changed."""
        for pdb in list(self._store.iter("poddisruptionbudgets")):
            status = {k: v for k, v in pdb_status(self._store, pdb).items() if v is not None}
            if _same(pdb.get("status") or {}, status):
                continue
            meta = pdb["metadata"]
            try:
                self._store.mutate("poddisruptionbudgets", meta.get("namespace"), meta["name"],
                                   lambda o, s=status: o.update(status=s))  # type: ignore[misc]
            except NotFound:
                continue


def _same(old: Obj, new: Obj) -> bool:
    """Equal but for the condition's transition time (rewriting only that would loop)."""
    def strip(status: Obj) -> Obj:
        conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions") or []]
        return {**status, "conditions": conditions}
    return strip(old) == strip(new)
