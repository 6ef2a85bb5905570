"""The device-taint eviction controller (KEP-5055): NoExecute device taints evict pods.

A pod whose claim uses a device with a NoExecute taint its request does not tolerate is
deleted at ``timeAdded + tolerationSeconds`` (at once without ``tolerationSeconds``,
never when tolerated without it). Each DeviceTaintRule gets an ``EvictionInProgress``
condition saying whether pods remain to be evicted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.claims import ClaimKey, PodKey, claim_requests
from podmedic_sim.devices import DevKey
from podmedic_sim.parts import SimParts, set_pod_condition
from podmedic_sim.store import NotFound, WatchEvent, now_rfc3339
from podmedic_sim.taints import Taint, find_toleration
from podmedic_sim.timers import Coalescer

CONDITION = "EvictionInProgress"


class EvictionController:
    """Deletes pods on NoExecute-tainted devices and reports progress on the rules."""

    def __init__(self, parts: SimParts, delete_pod: Callable[[Obj, str], None]) -> None:
        self._store = parts.store
        self._timers = parts.timers
        self._devices = parts.devices
        self._claims = parts.claims
        self._recorder = parts.recorder
        self._delete_pod = delete_pod
        self._pass = Coalescer(parts.timers, parts.config.timings.eviction_interval_s, self.reconcile)
        self._evicted: dict[str, int] = {}  # rule name -> pods evicted because of it
        self._wake_at: float | None = None

    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: anything that can change which pods must go."""
        if ev.resource in ("devicetaintrules", "resourceslices", "resourceclaims") or (
            ev.resource == "pods" and ev.type == "DELETED"
        ):
            self._pass.kick()

    def _targets(self) -> dict[DevKey, list[Taint]]:
        """Allocated devices with NoExecute taints (looked up without scanning idle devices)."""
        out: dict[DevKey, list[Taint]] = {}
        wide = False
        for rule in self._devices.rules.values():
            taint = self._devices.rule_taint(rule)
            if taint.effect not in ("NoExecute", "None"):
                continue
            sel = rule.get("spec", {}).get("deviceSelector") or {}
            if sel.get("driver") and sel.get("pool") and sel.get("device"):
                dev = (sel["driver"], sel["pool"], sel["device"])
                if dev in self._claims.owner:
                    out[dev] = self._devices.taints(dev)
            else:
                wide = True
        for dev, taints in self._devices.slice_taints.items():
            if dev in self._claims.owner and any(t.effect == "NoExecute" for t in taints):
                out[dev] = self._devices.taints(dev)
        if wide:
            for dev in self._claims.owner:
                if dev not in out:
                    taints = self._devices.taints(dev)
                    if any(t.effect in ("NoExecute", "None") for t in taints):
                        out[dev] = taints
        return out

    def reconcile(self) -> None:
        """Evict what is due, arm a timer for what is not, update rule conditions."""
        now = time.time()
        pending: dict[str, set[PodKey]] = {name: set() for name in self._devices.rules}
        would: dict[str, set[PodKey]] = {name: set() for name in self._devices.rules}
        next_due: float | None = None
        for dev, taints in self._targets().items():
            ckey = self._claims.owner[dev]
            tolerations = self._tolerations(ckey, dev)
            for pkey in self._claims.claim_pods.get(ckey, set()):
                pod = self._store.find("pods", *pkey)
                if pod is None or "deletionTimestamp" in pod["metadata"]:
                    continue
                for taint in taints:
                    due = self._due(taint, tolerations)
                    rule = (
                        taint.source.removeprefix("rule/")
                        if taint.source.startswith("rule/")
                        else None
                    )
                    if taint.effect == "None":
                        if rule in would and due is not None:
                            would[rule].add(pkey)
                        continue
                    if taint.effect != "NoExecute" or due is None:
                        continue
                    if rule in pending:
                        pending[rule].add(pkey)
                    if due <= now:
                        self._evict(pod, taint, rule)
                        break
                    next_due = due if next_due is None else min(next_due, due)
        for name in list(pending):
            if name in self._devices.rules:
                self._update_rule(name, pending[name], would[name])
        if next_due is not None:
            self._timers.call_later(next_due - now, lambda: self._pass.kick(0))

    def _tolerations(self, ckey: ClaimKey, dev: DevKey) -> list[dict[str, Any]]:
        claim = self._store.find("resourceclaims", *ckey)
        request = next((r for r, d in self._claims.claim_devices.get(ckey, []) if d == dev), "")
        for req in claim_requests(claim or {}):
            if req.name == request.split("/")[0]:
                return req.tolerations
        return []

    @staticmethod
    def _due(taint: Taint, tolerations: list[dict[str, Any]]) -> float | None:
        """When a pod must go because of a taint: None when tolerated for ever."""
        effect = "NoExecute" if taint.effect == "None" else taint.effect
        tol = find_toleration(tolerations, taint.key, taint.value, effect)
        if tol is None:
            return taint.time_added if taint.effect == "None" else 0.0
        seconds = tol.get("tolerationSeconds")
        return None if seconds is None else taint.time_added + max(float(seconds), 0.0)

    def _evict(self, pod: Obj, taint: Taint, rule: str | None) -> None:
        if rule is not None:
            self._evicted[rule] = self._evicted.get(rule, 0) + 1
        meta = pod["metadata"]

        def mark(p: Obj) -> None:
            set_pod_condition(
                p,
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByDeviceTaintManager",
                    "message": f"Device Taint manager: deleting due to NoExecute taint {taint.key}",
                },
            )

        try:
            pod = self._store.mutate("pods", meta.get("namespace"), meta["name"], mark)
        except NotFound:
            return
        self._recorder.event(
            pod,
            "DeviceTaintManagerEviction",
            "Marking for deletion",
            component="device-taint-eviction-controller",
        )
        self._delete_pod(pod, "DeviceTaintManagerEviction")

    def _update_rule(self, name: str, pending: set[PodKey], would: set[PodKey]) -> None:
        rule = self._devices.rules[name]
        effect = self._devices.rule_taint(rule).effect
        evicted = self._evicted.get(name, 0)
        if effect == "NoExecute":
            status = "True" if pending else "False"
            reason = "PodsPendingEviction" if pending else "Completed"
            namespaces = len({k[0] for k in pending})
            message = f"{len(pending)} pods need to be evicted in {namespaces} namespaces, {evicted} pods evicted"
        else:
            status, reason = "False", "NotNoExecute"
            message = (
                f"effect {effect} evicts no pods; {len(would)} pods would be evicted with NoExecute"
            )
        generation = rule["metadata"].get("generation", 1)
        old = next(
            (
                c
                for c in (rule.get("status") or {}).get("conditions") or []
                if c.get("type") == CONDITION
            ),
            None,
        )
        if old and (
            old.get("status"),
            old.get("reason"),
            old.get("message"),
            old.get("observedGeneration"),
        ) == (status, reason, message, generation):
            return
        cond = {
            "type": CONDITION,
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": generation,
            "lastTransitionTime": old["lastTransitionTime"]
            if old and old.get("status") == status
            else now_rfc3339(),
        }

        def edit(r: Obj) -> None:
            st = r.setdefault("status", {})
            st["conditions"] = [
                c for c in st.get("conditions") or [] if c.get("type") != CONDITION
            ] + [cond]

        self._store.mutate("devicetaintrules", None, name, edit)
