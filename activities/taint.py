"""Taint stage: one DeviceTaintRule per device, shared by the incidents that need it.

The rule's name derives from the device, so a retried or replayed activity finds the rule
it made instead of making a second, and a later incident of the same device (or a node
incident covering it) takes the rule over rather than racing its old owner. Who holds the
rule is recorded on it (``activities/holders.py``); a release deletes it only when no one
else holds it, and only if nobody changed it since it was read.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Callable

from temporalio import activity

from activities import holders
from activities.base import KubeActivities
from activities.heartbeat import kept_alive
from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceRef
from podmedic.domain.node import HoldTaintsInput
from podmedic.domain.policy_recovery import Effect
from podmedic.domain.steps import TaintInput, TaintResult, UntaintInput, UntaintResult
from podmedic.kube.gateway import Conflict, KubeGateway, NotServed

TAINT_KEY = "podmedic.io/unhealthy"
_TRIES = 5  # optimistic-concurrency retries against other writers of the same rule


def rule_body(device: DeviceRef, incident_id: str, effect: Effect, reason: str, holder: str | None = None) -> Obj:
    """The DeviceTaintRule (resource.k8s.io/v1) podmedic creates for an incident."""
    selector = {"driver": device.driver, "pool": device.pool, "device": device.device}
    return selector_rule(device.object_name, selector, incident_id, effect, reason, holder)


def selector_rule(name: str, selector: dict[str, str], incident_id: str, effect: Effect, reason: str,
                  holder: str | None = None, changed_by: str = "podmedic worker (taint stage)") -> Obj:
    """A DeviceTaintRule named ``name`` tainting what ``selector`` selects (a device, or a whole pool when it
    names no device), held by ``holder`` (default the incident)."""
    spec: Obj = {
        "deviceSelector": selector,
        "taint": {
            "key": TAINT_KEY,
            "value": "true",
            "effect": effect.value,
            "timeAdded": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    holder = holder or incident_id
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": name,
            "labels": {holders.MANAGED_BY: "podmedic", "podmedic.io/driver": selector["driver"][:63],
                       **({holders.POOL: holders.pool_label(selector["driver"], selector["pool"])}
                          if "pool" in selector else {})},
            "annotations": {
                holders.INCIDENT: incident_id,
                holders.OWNER_RUN: holder,
                holders.HOLDERS: json.dumps([holder]),
                holders.SPEC_HASH: holders.spec_hash(spec),
                holders.REASON: reason[:1000],
                holders.CHANGED_BY: changed_by,
            },
        },
        "spec": spec,
    }


def calling_run() -> str:
    """The incident run calling this activity: the name it holds rules under."""
    info = activity.info()
    return holders.holder_id(info.workflow_id or "", info.workflow_run_id or "")


RunClosedCheck = Callable[[str], Awaitable[bool]]
"""Whether the incident run named ``<workflow id>@<run id>`` is closed (Temporal describes it)."""


class TaintActivities(KubeActivities):
    """DeviceTaintRule create, take over and release; each idempotent. With ``closed_run``, a release
    also lets go of a closed run's hold of the same incident (a run reset away)."""

    def __init__(self, kube: KubeGateway, closed_run: RunClosedCheck | None = None) -> None:
        super().__init__(kube)
        self.closed_run = closed_run

    async def ensure(self, inp: TaintInput, holder: str) -> TaintResult:
        """Create the rule held by ``holder``, or take over the one already there."""
        return await self.ensure_rule(rule_body(inp.device, inp.incident_id, inp.effect, inp.reason, holder), holder,
                                      inp.effect, inp.reason)

    async def ensure_rule(self, body: Obj, holder: str, effect: Effect, reason: str) -> TaintResult:
        """Create the rule ``body``, or take over the one of its name already there."""
        name = body["metadata"]["name"]
        for _ in range(_TRIES):
            try:
                await self.api.create_taint_rule(body)
                return TaintResult(rule_name=name, created=True, effect=effect)
            except NotServed as exc:  # a feature gate is off: no retry can create it, the workflow falls back
                return TaintResult(rule_name="", created=False, effect=effect, unavailable=str(exc))
            except Conflict:  # the rule exists: read it live (the rule cache may not have seen it yet)
                existing = await self.api.get_taint_rule(name, fresh=True)
            if existing is None:
                continue  # deleted between create and get: create it again
            if holders.edited_by_operator(existing):
                activity.logger.warning("rule %s was edited by an operator: used as it is", name)
                return TaintResult(rule_name=name, created=False, effect=_effect(existing))
            patch = holders.plan_take(existing, holder, effect.value, reason)
            if patch is None:
                return TaintResult(rule_name=name, created=False, effect=_effect(existing))
            try:
                taken = await self.api.patch_taint_rule(name, patch)
            except Conflict:
                continue  # someone changed it since we read it: decide again
            return TaintResult(rule_name=name, created=False, effect=_effect(taken))
        raise Conflict(f"devicetaintrule {name}: still changing after {_TRIES} tries", 409)

    async def release(self, rule_name: str, holder: str, why: str, stopped: bool = False) -> UntaintResult:
        """Take ``holder`` off the rule; delete it when no one else holds it, unless the holder ``stopped``
        without verifying the device: then a rule left with no holder stays, marked as left by it
        (``holders.ORPHANED_FROM``), for the fleet guard's sweep to settle by the device's health."""
        for attempt in range(_TRIES):
            # The rule cache's copy first: a write over a version it has not seen yet answers 409, and
            # every later try reads the API server's.
            rule = await self.api.get_taint_rule(rule_name, fresh=attempt > 0)
            if rule is None:  # a retry after the delete went through, or someone removed it: untainted either way
                return UntaintResult(removed=True, detail="already removed")
            plan = holders.plan_release(rule, holder, why)
            if plan.action == "keep" and self.closed_run is not None:
                # A run reset away held it and this run never took it over: once that run is closed
                # its hold is this incident's to give up (a late release of the old run finds the new
                # one running and keeps the rule).
                for older in holders.older_runs(rule, holder):
                    if await self.closed_run(older):
                        plan = holders.plan_release(rule, older, f"{why} (for {older}, closed: reset away)")
                        break
            if plan.action == "delete" and stopped:
                plan = holders.plan_reclaim(rule, [holder, *holders.older_runs(rule, holder)], why,
                                             by=f"podmedic worker ({holder} stopped)")
            try:
                if plan.action == "delete":
                    await self.api.delete_taint_rule_if_unchanged(rule_name, rule["metadata"]["resourceVersion"])
                    return UntaintResult(removed=True, detail=plan.detail)
                if plan.action == "patch":
                    await self.api.patch_taint_rule(rule_name, plan.patch)
            except Conflict:
                continue  # taken over or edited since we read it: decide again on the new version
            return UntaintResult(removed=False, kept_for=plan.remaining, detail=plan.detail)
        raise Conflict(f"devicetaintrule {rule_name}: still changing after {_TRIES} tries", 409)

    async def hold(self, inp: HoldTaintsInput, holder: str) -> list[str]:
        """Add ``holder`` to the rules that exist for ``inp.devices``; the names it now holds."""
        held: list[str] = []
        for device in inp.devices:
            for attempt in range(_TRIES):
                rule = await self.api.get_taint_rule(device.object_name, fresh=attempt > 0)
                if rule is None or holders.edited_by_operator(rule):
                    break
                current = holders.holders_of(rule)
                if holder in current:
                    held.append(device.object_name)
                    break
                patch = {"metadata": {"resourceVersion": rule["metadata"]["resourceVersion"], "annotations": {
                    holders.HOLDERS: json.dumps([*current, holder]),
                    holders.CHANGED_BY: f"podmedic worker ({holder} holds it too)",
                    holders.REASON: inp.reason[:1000],
                    **({holders.ORPHANED_FROM: None} if holders.orphaned_from(rule) else {})}}}
                try:
                    await self.api.patch_taint_rule(device.object_name, patch)
                except Conflict:
                    continue
                held.append(device.object_name)
                break
        return held

    @activity.defn(name="taint_device")
    async def taint_device(self, inp: TaintInput) -> TaintResult:
        """Create the incident's DeviceTaintRule, or take over the one already there."""
        return await kept_alive(self.ensure(inp, calling_run()))

    @activity.defn(name="remove_taint")
    async def remove_taint(self, inp: UntaintInput) -> UntaintResult:
        """Release the rule: deleted only if no other incident still holds it (and never by a run that stopped)."""
        why = inp.stopped or f"{inp.incident_id} closed"
        return await kept_alive(self.release(inp.rule_name, calling_run(), why, stopped=bool(inp.stopped)))

    @activity.defn(name="hold_taints")
    async def hold_taints(self, inp: HoldTaintsInput) -> list[str]:
        """A node incident holds its devices' rules, so they stay while it does."""
        return await kept_alive(self.hold(inp, calling_run()))

    @activity.defn(name="release_taints")
    async def release_taints(self, inp: HoldTaintsInput) -> list[UntaintResult]:
        """A node incident lets go of its devices' rules (each deleted if no one else holds it)."""
        return [await kept_alive(self.release(d.object_name, calling_run(), inp.reason)) for d in inp.devices]


def _effect(rule: Obj) -> Effect:
    return Effect((rule.get("spec") or {}).get("taint", {}).get("effect") or "None")
