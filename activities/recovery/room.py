"""Where a replacement has room: free healthy devices on the pod's own node, else on a warm spare of its pool.

Both count the driver's devices with ``placement.free_healthy_devices`` (published, unallocated, not tainted,
never the failed one) against the devices the pod holds now.
"""

from __future__ import annotations

from activities.claim_cache import ReservedClaims
from activities.recovery.placement import free_healthy_devices
from podmedic.domain import spares
from podmedic.domain.base import Obj
from podmedic.domain.steps import RecoverInput
from podmedic.kube.loop_calls import LoopCalls


async def _needed(claims: ReservedClaims, pod: Obj | None) -> int:
    return max(1, len((await claims.device_health(pod)).devices)) if pod is not None else 1


async def short_on_own_node(api: LoopCalls, claims: ReservedClaims, inp: RecoverInput, pod: Obj | None) -> str | None:
    """Why the pod's node cannot take its replacement (fewer free healthy devices than it holds), or ``None``.
    The devices of the pod's own claims count as free: the eviction releases them."""
    node, device = inp.pod.node or "", inp.device
    free = free_healthy_devices(node, device.driver, await api.list_slices(f"spec.nodeName={node}"),
                                await api.list_claims(), await api.list_taint_rules(), device, inp.pod.uid)
    needed = await _needed(claims, pod)
    if len(free) < needed:
        return (f"node {node} has {len(free)} free healthy {device.driver} device(s), the replacement needs "
                f"{needed}: not rescheduling to the same node")
    return None


async def warm_spare(api: LoopCalls, claims: ReservedClaims, inp: RecoverInput, pod: Obj) -> str | None:
    """The first warm spare serving the pod's node's pool (``podmedic/domain/spares.py``) with room for the
    replacement, or ``None``."""
    here = await api.get_node(inp.pod.node or "")
    if here is None:
        return None
    device, needed = inp.device, await _needed(claims, pod)
    found, rules = await api.list_claims(), await api.list_taint_rules()
    for spare in await api.list_nodes():
        name = str(spare["metadata"]["name"])
        if spares.served_by(here, spare) and len(free_healthy_devices(
                name, device.driver, await api.list_slices(f"spec.nodeName={name}"), found, rules, device)) >= needed:
            return name
    return None
