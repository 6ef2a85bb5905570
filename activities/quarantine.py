"""Node quarantine: cordon a node and taint it for a node incident, and undo exactly that.

The Node is annotated with the incident run that quarantined it, who changed it and why,
and whether it was already cordoned before (undo must not uncordon a node an operator had
cordoned). Every write carries the resourceVersion it was decided on, so a concurrent
change (an operator, the node controller) makes the activity read again and decide anew;
running it twice changes nothing the second time.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from temporalio import activity

from activities.base import KubeActivities
from activities.holders import holder_id
from podmedic.domain.base import Obj
from podmedic.domain.node import PluginCapacity, PluginCapacityInput, QuarantineInput, QuarantineResult
from podmedic.kube.gateway import Conflict

QUARANTINED_BY = "podmedic.io/quarantined-by"
WAS_CORDONED = "podmedic.io/was-cordoned"
CHANGED_BY = "podmedic.io/changed-by"
REASON = "podmedic.io/reason"
INCIDENT = "podmedic.io/incident"
_TRIES = 5


def _taints(node: Obj) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def _notes(node: Obj) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def plan_quarantine(node: Obj, inp: QuarantineInput, holder: str) -> Obj | None:
    """The patch that quarantines ``node`` for ``holder``; ``None`` when it already is."""
    spec = node.get("spec") or {}
    taints = _taints(node)
    mine = [t for t in taints if t.get("key") == inp.taint_key]
    cordoned = bool(spec.get("unschedulable"))
    notes = _notes(node)
    if mine and mine[0].get("effect") == inp.effect and (cordoned or not inp.cordon) \
            and notes.get(QUARANTINED_BY) == holder:
        return None
    kept = [t for t in taints if t.get("key") != inp.taint_key]
    taint = {"key": inp.taint_key, "value": inp.incident_id.replace("/", "_")[:63], "effect": inp.effect,
             "timeAdded": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    annotations = {QUARANTINED_BY: holder, INCIDENT: inp.incident_id,
                   CHANGED_BY: f"podmedic worker (node incident {holder})", REASON: inp.reason[:1000]}
    if QUARANTINED_BY not in notes:
        # Only the first quarantine records the node's own state; a take-over by a later run keeps it.
        annotations[WAS_CORDONED] = "true" if cordoned else "false"
    body: Obj = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"], "annotations": annotations},
                 "spec": {"taints": [*kept, taint]}}
    if inp.cordon:
        body["spec"]["unschedulable"] = True
    return body


def plan_lift(node: Obj, inp: QuarantineInput, holder: str) -> tuple[Obj | None, str]:
    """The patch that undoes ``holder``'s quarantine, and what it does, for a person."""
    notes = _notes(node)
    owner = notes.get(QUARANTINED_BY)
    if owner is None:
        return None, "not quarantined (already lifted, or lifted by an operator)"
    if owner != holder:
        return None, f"kept: quarantined by {owner} now, not by {holder}"
    kept = [t for t in _taints(node) if t.get("key") != inp.taint_key]
    annotations: dict[str, str | None] = {QUARANTINED_BY: None, WAS_CORDONED: None, INCIDENT: None,
                                          CHANGED_BY: f"podmedic worker (node incident {holder} lifted)",
                                          REASON: inp.reason[:1000]}
    body: Obj = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"], "annotations": annotations},
                 "spec": {"taints": kept}}
    was_cordoned = notes.get(WAS_CORDONED) == "true"
    if inp.cordon and not was_cordoned:
        body["spec"]["unschedulable"] = None
    what = "taint removed" + ("" if was_cordoned or not inp.cordon else ", uncordoned")
    if was_cordoned:
        what += " (left cordoned: it was cordoned before the incident)"
    return body, what


class QuarantineActivities(KubeActivities):
    """Cordon + node taint for a node incident, and its undo; both idempotent."""

    async def _apply(self, inp: QuarantineInput, holder: str, lift: bool) -> QuarantineResult:
        for _ in range(_TRIES):
            node = await self.api.get_node(inp.node)
            if node is None:
                return QuarantineResult(node_found=False, changed=False, detail=f"node {inp.node} not found")
            if lift:
                body, detail = plan_lift(node, inp, holder)
            else:
                body = plan_quarantine(node, inp, holder)
                detail = (f"cordoned and tainted {inp.taint_key}:{inp.effect}" if inp.cordon
                          else f"tainted {inp.taint_key}:{inp.effect}")
                detail = detail if body is not None else f"already quarantined ({detail})"
            if body is None:
                return QuarantineResult(node_found=True, changed=False, detail=detail)
            try:
                await self.api.patch_node(inp.node, body)
            except Conflict:
                continue
            return QuarantineResult(node_found=True, changed=True, detail=detail)
        raise Conflict(f"node {inp.node}: still changing after {_TRIES} tries", 409)

    async def quarantine(self, inp: QuarantineInput, holder: str) -> QuarantineResult:
        """Cordon (if asked) and taint the node for ``holder``."""
        return await self._apply(inp, holder, lift=False)

    async def lift(self, inp: QuarantineInput, holder: str) -> QuarantineResult:
        """Undo ``holder``'s quarantine; another run's quarantine is left alone."""
        return await self._apply(inp, holder, lift=True)

    @activity.defn(name="quarantine_node")
    async def quarantine_node(self, inp: QuarantineInput) -> QuarantineResult:
        """Cordon and taint the node for the calling node incident."""
        info = activity.info()
        return await self.quarantine(inp, holder_id(info.workflow_id or "", info.workflow_run_id or ""))

    async def plugin_capacity(self, inp: PluginCapacityInput) -> PluginCapacity:
        """The node's capacity and allocatable of ``inp.resources``."""
        node = await self.api.get_node(inp.node)
        if node is None:
            return PluginCapacity(node_found=False)
        status = node.get("status") or {}
        capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
        return PluginCapacity(node_found=True,
                              capacity={r: str(capacity[r]) for r in inp.resources if r in capacity},
                              allocatable={r: str(allocatable[r]) for r in inp.resources if r in allocatable})

    @activity.defn(name="node_plugin_capacity")
    async def node_plugin_capacity(self, inp: PluginCapacityInput) -> PluginCapacity:
        """Are the node's device-plugin devices healthy again (allocatable equal to capacity)?"""
        return await self.plugin_capacity(inp)

    @activity.defn(name="lift_quarantine")
    async def lift_quarantine(self, inp: QuarantineInput) -> QuarantineResult:
        """Uncordon and untaint the node, if the calling node incident quarantined it."""
        info = activity.info()
        return await self.lift(inp, holder_id(info.workflow_id or "", info.workflow_run_id or ""))
