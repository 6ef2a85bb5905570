"""The simulated DRA allocator: picks free, untainted devices on one node for a claim.

Like the scheduler's DRA plugin (structured parameters): a request takes ``count`` devices
(or all of them) from the node's ResourceSlices of the request's driver, skipping devices
another claim holds and devices with a ``NoSchedule``/``NoExecute`` taint (KEP-5055) the
request does not tolerate.
"""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic_sim.claims import ClaimBook, claim_requests
from podmedic_sim.devices import DeviceRegistry, DevKey
from podmedic_sim.taints import blocks_scheduling, find_toleration


def claim_node(claim: Obj) -> str | None:
    """The node an already allocated claim pins its pods to (its allocation's node selector)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    for term in (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return None


class DeviceAllocator:
    """Allocates the devices of one node's slices to claims."""

    def __init__(self, devices: DeviceRegistry, claims: ClaimBook) -> None:
        self._devices = devices
        self._claims = claims

    def allocate(self, claim: Obj, node: str, taken: set[DevKey]) -> list[dict[str, str]] | None:
        """Devices on ``node`` for each of the claim's requests, or ``None`` if one cannot be met.

        ``taken`` holds devices already picked for the pod's other claims; it grows.
        """
        results: list[dict[str, str]] = []
        for req in claim_requests(claim):
            driver = self._claims.driver_of_class(req.device_class)
            slices = [s for s in self._devices.by_node.get(node, []) if s.driver == driver]
            free_total = sum(len(s.devices) - self._claims.pool_used.get((driver, s.pool), 0) for s in slices)
            if not req.all_devices and free_total < req.count:
                return None
            picked: list[DevKey] = []
            for s in slices:
                for dev in s.devices:
                    dk = (driver, s.pool, dev)
                    if dk in taken or dk in self._claims.owner or not self._tolerated(dk, req.tolerations):
                        continue
                    picked.append(dk)
                    if not req.all_devices and len(picked) == req.count:
                        break
            if not picked or (not req.all_devices and len(picked) < req.count):
                return None
            taken.update(picked)
            results.extend({"request": req.name, "driver": d, "pool": p, "device": dev} for d, p, dev in picked)
        return results

    def _tolerated(self, dk: DevKey, tolerations: list[dict[str, object]]) -> bool:
        for t in self._devices.taints(dk):
            if blocks_scheduling(t.effect) and find_toleration(tolerations, t.key, t.value, t.effect) is None:
                return False
        return True
