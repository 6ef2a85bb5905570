"""Reads for a node's announced maintenance (``workflows/node/maintenance.py``): what moves, where it can go, and
whether the node is back.

The cordon (``quarantine_node`` / ``lift_quarantine``), the checkpoint (``request_checkpoints``) and the move
(``reschedule_any_node``, a warm spare first) are the activities every incident uses.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import activity

from activities.base import KubeActivities
from activities.claim_cache import ReservedClaims
from activities.recovery.placement import free_healthy_devices
from podmedic.domain import spares
from podmedic.domain.base import Obj
from podmedic.domain.maintenance import GKE_LABEL, SAVE_S, MaintenancePlan, MovingPod, PlanInput
from podmedic.kube import podview
from podmedic.kube.gateway import KubeGateway


class NodeBackInput(BaseModel):
    """Is the node back from its maintenance?"""

    node: str


class NodeBack(BaseModel):
    """The node Ready with no maintenance announced (or gone), in words."""

    back: bool
    detail: str
    down: bool | None = Field(None, description="The node is not Ready or is gone: its maintenance has begun. "
                                                "None: an answer of release 0.1.0, which said so only in words.")

    @property
    def went_down(self) -> bool:
        """Whether the node was seen down (the words of a 0.1.0 answer read as that release read them)."""
        if self.down is not None:
            return self.down
        return "not Ready" in self.detail or "not found" in self.detail


def _save_s(pod: Obj, default_s: float) -> float:
    """The pod's declared save time, else ``default_s``; a value that is no positive number is not used."""
    try:
        declared = float(podview.annotations_of(pod).get(SAVE_S, ""))
    except ValueError:
        return default_s
    return declared if declared > 0 else default_s


class MaintenanceActivities(KubeActivities):
    """The node's pods and the room elsewhere, over one gateway and the worker's claim cache."""

    def __init__(self, kube: KubeGateway, claims: ReservedClaims) -> None:
        super().__init__(kube)
        self.claims = claims

    async def plan(self, inp: PlanInput) -> MaintenancePlan:
        """The node's running pods that hold devices, their slowest save, and room for them on other nodes."""
        here = await self.api.get_node(inp.node)
        if here is None:
            return MaintenancePlan(node_found=False, room=f"node {inp.node} not found")
        moving, needed = [], []
        for pod in await self.api.list_pods_on_node(inp.node):
            if (pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase")
                    in ("Succeeded", "Failed")):
                continue
            devices = sorted((await self.claims.device_health(pod)).devices, key=lambda d: d.resource_id)
            if devices:
                moving.append(MovingPod(pod=podview.pod_ref(pod), device=devices[0],
                                        save_s=_save_s(pod, inp.default_save_s)))
                needed.append(len(devices))
        room, enough = await self._room(here, moving, needed)
        return MaintenancePlan(pods=moving, save_s=max((m.save_s for m in moving), default=0.0), room=room,
                               enough_room=enough)

    async def _room(self, here: Obj, moving: list[MovingPod], needed: list[int]) -> tuple[str, bool]:
        """Whether every moving pod fits (``needed``: its devices), one by one, on the free healthy devices of
        another fit node (a warm spare of the node's pool included), and where that room is."""
        if not moving:
            return "nothing to move", True
        claims, rules, slices = await self.api.list_claims(), await self.api.list_taint_rules(), \
            await self.api.list_slices()
        fleet = spares.Fleet(await self.api.list_nodes(), slices, claims, rules)
        name = here["metadata"]["name"]
        free: dict[str, int] = {}
        for node in fleet.nodes:
            other = node["metadata"]["name"]
            spare = spares.is_spare(node)
            if other == name or (spare and not spares.served_by(here, node)) or \
                    (not spare and fleet.unfit(node) is not None):
                continue
            driver = moving[0].device.driver
            count = len(free_healthy_devices(other, driver, slices, claims, rules, moving[0].device))
            if count:
                free[other + (" (warm spare)" if spare else "")] = count
        left = dict(free)
        for want in sorted(needed, reverse=True):
            fit = next((n for n, c in sorted(left.items(), key=lambda i: -i[1]) if c >= want), None)
            if fit is None:
                return (f"no room for all {len(moving)} pod(s) ({sum(needed)} device(s)) elsewhere: free "
                        f"{', '.join(f'{n} {c}' for n, c in sorted(free.items())) or 'nowhere'}"), False
            left[fit] -= want
        return (f"room for {len(moving)} pod(s) ({sum(needed)} device(s)) elsewhere: free "
                f"{', '.join(f'{n} {c}' for n, c in sorted(free.items()))}"), True

    @activity.defn(name="plan_maintenance")
    async def plan_maintenance(self, inp: PlanInput) -> MaintenancePlan:
        """The pods the node's maintenance moves, their slowest save, and the room elsewhere."""
        return await self.plan(inp)

    async def back(self, inp: NodeBackInput) -> NodeBack:
        """The node Ready with its maintenance label gone."""
        node = await self.api.get_node(inp.node)
        if node is None:
            return NodeBack(back=False, down=True, detail=f"node {inp.node} not found (deleted by its maintenance?)")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (node.get("status") or {}).get("conditions") or [])
        announced = (node["metadata"].get("labels") or {}).get(GKE_LABEL)
        if not ready:
            return NodeBack(back=False, down=True, detail=f"node {inp.node} not Ready")
        if announced is not None:
            return NodeBack(back=False, down=False,
                            detail=f"node {inp.node} Ready, maintenance still announced ({announced})")
        return NodeBack(back=True, down=False, detail=f"node {inp.node} Ready, no maintenance announced")

    @activity.defn(name="node_back")
    async def node_back(self, inp: NodeBackInput) -> NodeBack:
        """Is the node back: Ready, with no maintenance announced?"""
        return await self.back(inp)
