"""Device taints that drivers write into their ResourceSlices (``resource.k8s.io/v1``).

A driver taints a device it found broken (``gpu.nvidia.com/xid=79``,
``gpu.nvidia.com/gpu-lost``), with any effect, ``None`` included: ``None`` keeps
pods running but is still a statement about the device. Per device the source diffs
``spec.devices[].taints``: every new taint is an Unhealthy ``DeviceHealthEvent`` whose
``reason`` is the taint key (what the key means per driver is the policy's
``detection.slice_taints``, applied by the classifier), and all taints gone from a device
that had some is a Healthy one. Keys under ``podmedic.io/`` are podmedic's own and skipped
(they live in DeviceTaintRules, which never appear in ResourceSlices, but a driver or an
operator might copy one).
"""

from __future__ import annotations

import datetime as dt
import re

from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health
from podmedic.kube.podview import api_time
from workers.ingest.sources.cursor import Memory
from workers.ingest.sources.watch_loop import Change, ClusterSource, Observation

OWN_PREFIX = "podmedic.io/"
_NUMBER = re.compile(r"^[+-]?\d+$")

TaintTuple = tuple[str, str, str, str]  # key, value, effect, timeAdded


def _taints(device: Obj) -> frozenset[TaintTuple]:
    return frozenset(
        (str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""), str(t.get("timeAdded") or ""))
        for t in device.get("taints") or []
        if t.get("key") and not str(t["key"]).startswith(OWN_PREFIX)
    )


def _when(stamp: str) -> dt.datetime:
    """The taint's ``timeAdded`` (when the driver saw the fault), else now."""
    return api_time(stamp) or dt.datetime.now(dt.UTC)


class SliceTaintSource(ClusterSource):
    """Turns driver-written ResourceSlice device taints into ``DeviceHealthEvent``s."""

    name = "slice-taints"
    kind = "resourceslices"

    _tainted: dict[str, tuple[str, frozenset[TaintTuple]]]  # resourceID -> (slice name, its taints)

    def change(self, kind: str, obj: Obj) -> Change:
        """Events for every device of this slice whose taints changed."""
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        slice_name = str(meta.get("name") or "")
        before = {rid: taints for rid, (name, taints) in self._tainted.items() if name == slice_name}
        after: dict[str, frozenset[TaintTuple]] = {}
        events: list[Observation] = []
        driver, pool = str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or "")
        if kind != "DELETED" and driver and pool:
            for device in spec.get("devices") or []:
                try:
                    ref = DeviceRef(driver=driver, pool=pool, device=str(device.get("name") or ""))
                except ValueError:
                    continue
                now = _taints(device)
                if now:
                    after[ref.resource_id] = now
                events.extend(self._events(obj, ref, before.get(ref.resource_id, frozenset()), now))

        def apply() -> None:
            for rid in before:
                self._tainted.pop(rid, None)
            for rid, taints in after.items():
                self._tainted[rid] = (slice_name, taints)

        return Change(events, apply)

    def _events(self, obj: Obj, ref: DeviceRef, before: frozenset[TaintTuple],
                now: frozenset[TaintTuple]) -> list[Observation]:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        node, slice_name = spec.get("nodeName"), meta.get("name")
        events: list[Observation] = []
        for key, value, effect, added in sorted(now - before):
            events.append(DeviceHealthEvent(
                device=ref, health=Health.UNHEALTHY, node=node, reason=key,
                code=int(value) if _NUMBER.match(value) else None,
                message=f"{key}={value} (effect {effect}) on ResourceSlice {slice_name}",
                source="slice-taint", observed_at=_when(added),
                event_id=f"slice-taint/{ref.resource_id}/{key}={value}@{added}",
            ))
        if before and not now:
            cleared = ", ".join(sorted(key for key, *_ in before))
            events.append(DeviceHealthEvent(
                device=ref, health=Health.HEALTHY, node=node, reason="slice-taint-removed",
                message=f"taints removed from the device in ResourceSlice {slice_name}: {cleared}",
                source="slice-taint", observed_at=dt.datetime.now(dt.UTC),
                # The slice's resourceVersion: a replay of this change keeps the id.
                event_id=f"slice-taint/{ref.resource_id}/cleared@{meta.get('resourceVersion') or ''}",
            ))
        return events

    def missing(self, listed: list[Obj]) -> Change:
        """Slices deleted while the watch was away: forget their devices (no news either way)."""
        present = {(o.get("metadata") or {}).get("name") for o in listed}
        gone = [rid for rid, (name, _) in self._tainted.items() if name not in present]

        def forget() -> None:
            for rid in gone:
                self._tainted.pop(rid, None)

        return Change(apply=forget)

    def memory(self) -> Memory:
        """``{"devices": {resourceID: {"slice": name, "taints": [[key, value, effect, timeAdded]]}}}``."""
        return {"devices": {rid: {"slice": name, "taints": sorted(list(t) for t in taints)}
                            for rid, (name, taints) in self._tainted.items()}}

    def restore(self, memory: Memory) -> None:
        """Take back ``memory()`` as saved with the cursor."""
        devices = memory.get("devices") or {}
        self._tainted = {
            str(rid): (str(entry.get("slice") or ""),
                       frozenset((str(a), str(b), str(c), str(d)) for a, b, c, d in entry.get("taints") or []))
            for rid, entry in devices.items() if isinstance(entry, dict)
        }
