"""Taint stage: one DeviceTaintRule per device incident, created once, removed once.

The rule's name derives from the device, so a retried or replayed activity finds the rule
it made instead of making a second; its annotations say which incident made it and why.
"""

from __future__ import annotations

import datetime as dt

from temporalio import activity

from activities import podview
from activities.base import KubeActivities
from activities.kube import Conflict, Obj
from podmedic.models import DeviceRef
from podmedic.policy import Effect
from podmedic.steps import TaintInput, TaintResult, UntaintInput

TAINT_KEY = "podmedic.io/unhealthy"


def rule_body(device: DeviceRef, incident_id: str, effect: Effect, reason: str) -> Obj:
    """The DeviceTaintRule (resource.k8s.io/v1) podmedic creates for an incident."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": device.object_name,
            "labels": {"app.kubernetes.io/managed-by": "podmedic", "podmedic.io/driver": device.driver[:63]},
            "annotations": {
                podview.INCIDENT: incident_id,
                "podmedic.io/reason": reason[:1000],
                "podmedic.io/changed-by": "podmedic worker (taint stage)",
            },
        },
        "spec": {
            "deviceSelector": {"driver": device.driver, "pool": device.pool, "device": device.device},
            "taint": {
                "key": TAINT_KEY,
                "value": "true",
                "effect": effect.value,
                "timeAdded": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        },
    }


class TaintActivities(KubeActivities):
    """DeviceTaintRule create and delete, both idempotent."""

    def _ensure(self, inp: TaintInput) -> TaintResult:
        body = rule_body(inp.device, inp.incident_id, inp.effect, inp.reason)
        name = body["metadata"]["name"]
        try:
            self.kube.create_taint_rule(body)
            return TaintResult(rule_name=name, created=True, effect=inp.effect)
        except Conflict:
            existing = self.kube.get_taint_rule(name)
            if existing is None:
                raise  # deleted between create and get: let the retry policy try again
        effect = Effect(existing["spec"]["taint"].get("effect") or "None")
        return TaintResult(rule_name=name, created=False, effect=effect)

    def _remove(self, inp: UntaintInput) -> bool:
        rule = self.kube.get_taint_rule(inp.rule_name)
        if rule is None:
            return False
        owner = podview.annotations_of(rule).get(podview.INCIDENT)
        if owner != inp.incident_id:
            activity.logger.warning("rule %s belongs to %s, not %s: kept", inp.rule_name, owner, inp.incident_id)
            return False
        self.kube.delete_taint_rule(inp.rule_name)
        return True

    @activity.defn(name="taint_device")
    async def taint_device(self, inp: TaintInput) -> TaintResult:
        """Create the incident's DeviceTaintRule, or return the one already there."""
        return await self.run(self._ensure, inp)

    @activity.defn(name="remove_taint")
    async def remove_taint(self, inp: UntaintInput) -> bool:
        """Delete the rule if this incident made it; never another incident's rule."""
        return await self.run(self._remove, inp)
