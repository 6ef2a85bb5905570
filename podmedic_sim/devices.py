"""Device inventory and health: which devices exist, their faults, and their taints.

The inventory is indexed from ResourceSlices (kept in sync by a store listener), so a
driver's devices are looked up by ``(driver, pool, device)`` in O(1). Health lives here,
not in the store: real drivers report health through the kubelet (KEP-4680), which is
what the simulated kubelet does with it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from podmedic.domain.base import Obj
from podmedic_sim.store import Store, WatchEvent, json_copy
from podmedic_sim.taints import Taint, format_time, parse_time

DevKey = tuple[str, str, str]  # (driver, pool, device)
HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")

REPLACED = "DeviceReplaced"
"""Reason of a Healthy report that means the GPU was swapped for a new one (a vendor's RMA): the
new GPU has a new UUID, which the driver publishes in its ResourceSlice and NVML answers."""
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")


@dataclass
class Fault:
    """The health a device reports, and how an injected fault behaves."""

    health: str = "Healthy"
    reason: str = ""
    code: int | None = None
    message: str = ""
    crash: bool = False
    clears_on_restart: bool = False
    since: float = field(default_factory=time.time)


class Reported(Protocol):
    """Whether the kubelet holds a fresh health report for a device (``health_stream.HealthStreams``)."""

    def reported(self, dev: DevKey, timeout_s: float, now: float | None = None) -> bool:
        """False once the driver's stream ended, or was silent longer than ``timeout_s``."""


@dataclass
class SliceInfo:
    """What the scheduler and kubelet need from one ResourceSlice."""

    name: str
    driver: str
    pool: str
    node: str
    devices: list[str]


class DeviceRegistry:
    """Devices by key, their faults, slice taints and DeviceTaintRules."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.slices: dict[tuple[str, str], SliceInfo] = {}
        self.by_node: dict[str, list[SliceInfo]] = {}
        self.faults: dict[DevKey, Fault] = {}
        self.slice_taints: dict[DevKey, list[Taint]] = {}
        self.prepare_faults: dict[DevKey, str] = {}  # device -> the driver's prepare error
        self.rules: dict[str, Obj] = {}
        self._rule_first_seen: dict[str, float] = {}
        self.health_listeners: list[Callable[[DevKey, Fault], None]] = []
        self.streams: Reported | None = None  # the drivers' health streams (set by the engine)

    # -- indexing ------------------------------------------------------------------------
    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: keep slices and rules indexed."""
        if ev.resource == "resourceslices":
            self._index_slice(ev.obj, deleted=ev.type == "DELETED")
        elif ev.resource == "devicetaintrules":
            name = ev.obj["metadata"]["name"]
            if ev.type == "DELETED":
                self.rules.pop(name, None)
                self._rule_first_seen.pop(name, None)
            else:
                self.rules[name] = ev.obj
                self._rule_first_seen.setdefault(name, time.time())

    def _index_slice(self, obj: Obj, *, deleted: bool) -> None:
        spec = obj.get("spec", {})
        driver, node = spec.get("driver", ""), spec.get("nodeName", "")
        pool = spec.get("pool", {}).get("name", "")
        old = self.slices.pop((driver, pool), None)
        if old is not None:
            self.by_node[old.node] = [s for s in self.by_node.get(old.node, []) if s is not old]
            for dev in old.devices:
                self.slice_taints.pop((driver, pool, dev), None)
        if deleted:
            return
        info = SliceInfo(
            obj["metadata"]["name"],
            driver,
            pool,
            node,
            [d["name"] for d in spec.get("devices", [])],
        )
        self.slices[(driver, pool)] = info
        self.by_node.setdefault(node, []).append(info)
        for dev in spec.get("devices", []):
            taints = [
                Taint(
                    t["key"],
                    t.get("value", ""),
                    t["effect"],
                    parse_time(t.get("timeAdded")),
                    "slice",
                )
                for t in dev.get("taints", []) or []
            ]
            if taints:
                self.slice_taints[(driver, pool, dev["name"])] = taints

    # -- queries -------------------------------------------------------------------------
    def exists(self, key: DevKey) -> bool:
        """Whether a slice publishes this device."""
        info = self.slices.get((key[0], key[1]))
        return info is not None and key[2] in info.devices

    def node_of(self, key: DevKey) -> str | None:
        """Node whose slice publishes the device's pool."""
        info = self.slices.get((key[0], key[1]))
        return info.node if info else None

    def fault(self, key: DevKey) -> Fault:
        """The device's current health record (Healthy when never faulted)."""
        return self.faults.get(key) or Fault(since=0.0)

    def rule_matches(self, rule: Obj, key: DevKey) -> bool:
        """Whether a DeviceTaintRule's selector (driver/pool/device; empty = any) selects it."""
        sel = rule.get("spec", {}).get("deviceSelector", {}) or {}
        return all(
            not sel.get(f) or sel[f] == v
            for f, v in zip(("driver", "pool", "device"), key, strict=True)
        )

    def rule_taint(self, rule: Obj) -> Taint:
        """The taint a rule applies; ``timeAdded`` defaults to when the rule appeared."""
        name = rule["metadata"]["name"]
        t = rule.get("spec", {}).get("taint", {}) or {}
        first = self._rule_first_seen.get(name, time.time())
        return Taint(
            t.get("key", ""),
            t.get("value", ""),
            t.get("effect", "None"),
            parse_time(t.get("timeAdded"), first),
            f"rule/{name}",
        )

    def taints(self, key: DevKey) -> list[Taint]:
        """Every taint on the device, from DeviceTaintRules and from its slice."""
        out = [self.rule_taint(r) for r in self.rules.values() if self.rule_matches(r, key)]
        out.extend(self.slice_taints.get(key, ()))
        return out

    # -- changes -------------------------------------------------------------------------
    def set_health(self, key: DevKey, fault: Fault) -> None:
        """Record a device's health and tell the listeners (kubelet) about it."""
        if not self.exists(key):
            raise KeyError(f"device {'/'.join(key)} not found")
        if fault.health not in HEALTH_VALUES:
            raise ValueError(
                f"health must be one of {', '.join(HEALTH_VALUES)}, got {fault.health!r}"
            )
        if fault.health == "Healthy" and not fault.reason and not fault.message:
            self.faults.pop(key, None)
        else:
            self.faults[key] = fault
        if fault.health == "Healthy" and fault.reason == REPLACED:
            self._new_uuid(key)
        for listener in list(self.health_listeners):
            listener(key, self.fault(key))

    def _new_uuid(self, key: DevKey) -> None:
        """The replacement GPU's identity, republished in the slice as the DRA driver does."""
        info = self.slices[(key[0], key[1])]

        def edit(obj: Obj) -> None:
            for dev in obj["spec"].get("devices", []):
                if dev["name"] == key[2] and "uuid" in (dev.get("attributes") or {}):
                    dev["attributes"]["uuid"] = {"string": f"GPU-{uuid.uuid4()}"}

        self._store.mutate("resourceslices", None, info.name, edit)

    def set_prepare_failure(self, key: DevKey, message: str, *, clear: bool = False) -> None:
        """Make the driver fail (or, with ``clear``, stop failing) to prepare the device for pods."""
        if not self.exists(key):
            raise KeyError(f"device {'/'.join(key)} not found")
        if clear:
            self.prepare_faults.pop(key, None)
            return
        if not message:
            raise ValueError("message must not be empty unless clear is true")
        self.prepare_faults[key] = message

    def set_slice_taint(
        self, key: DevKey, taint_key: str, value: str, effect: str, *, remove: bool
    ) -> Obj:
        """Add (or replace) or remove a driver-written taint on a device in its ResourceSlice."""
        info = self.slices.get((key[0], key[1]))
        if info is None or key[2] not in info.devices:
            raise KeyError(f"device {'/'.join(key)} not found")
        if not remove and effect not in TAINT_EFFECTS:
            raise ValueError(f"effect must be one of {', '.join(TAINT_EFFECTS)}, got {effect!r}")

        def edit(obj: Obj) -> None:
            for dev in obj["spec"].get("devices", []):
                if dev["name"] != key[2]:
                    continue
                kept: list[dict[str, Any]] = [
                    t for t in dev.get("taints", []) or [] if t.get("key") != taint_key
                ]
                if not remove:
                    kept.append(
                        {
                            "key": taint_key,
                            "value": value,
                            "effect": effect,
                            "timeAdded": format_time(time.time()),
                        }
                    )
                if kept:
                    dev["taints"] = kept
                else:
                    dev.pop("taints", None)

        fresh: Obj = json_copy(self._store.mutate("resourceslices", None, info.name, edit))
        return fresh
