"""A storm's pool fence in the cluster: one DeviceTaintRule over a pool, and whether its devices have their own.

The pool's rule is made and released like a device's (``activities/taint.py``): named after the
pool, so a retried or replayed activity finds the rule it made; held by the fence's run, so a
release deletes it only when no one else holds it and nobody changed it since it was read.
"""

from __future__ import annotations

from temporalio import activity

from activities import holders
from activities.base import KubeActivities
from activities.heartbeat import kept_alive
from activities.taint import TaintActivities, calling_run, selector_rule
from podmedic.domain.policy_recovery import Effect
from podmedic.domain.pool_fence import PoolDevicesInput, PoolRuleInput
from podmedic.domain.steps import TaintResult, UntaintResult
from podmedic.kube.gateway import KubeGateway

CHANGED_BY = "podmedic worker (storm pool fence)"


class PoolFenceActivities(KubeActivities):
    """The pool's rule: create, release; and which devices are not yet fenced on their own."""

    def __init__(self, kube: KubeGateway) -> None:
        super().__init__(kube)
        self.taints = TaintActivities(kube)

    async def _fence(self, inp: PoolRuleInput, holder: str) -> TaintResult:
        # NoSchedule only: no pod is evicted by a whole pool's rule, so the fleet guard's limits on
        # disruption are not what it spends; each device's incident decides its own effect.
        selector = {"driver": inp.pool.driver, "pool": inp.pool.pool}
        body = selector_rule(inp.pool.rule_name, selector, inp.pool.workflow_id, Effect.NO_SCHEDULE, inp.reason,
                             holder, CHANGED_BY)
        return await self.taints.ensure_rule(body, holder, Effect.NO_SCHEDULE, inp.reason)

    @activity.defn(name="fence_pool")
    async def fence_pool(self, inp: PoolRuleInput) -> TaintResult:
        """Create the pool's NoSchedule rule, or take over the one already there."""
        return await kept_alive(self._fence(inp, calling_run()))

    @activity.defn(name="unfence_pool")
    async def unfence_pool(self, inp: PoolRuleInput) -> UntaintResult:
        """Let go of the pool's rule: deleted unless someone else holds it (or an operator edited it)."""
        return await kept_alive(self.taints.release(inp.pool.rule_name, calling_run(), inp.reason))

    async def _without_own_rule(self, inp: PoolDevicesInput) -> list[str]:
        # One list per pool (its rules carry the pool's label), not a get per device: in a storm under the
        # manifests' QPS limit, the pools' gets per device were most of the worker's requests.
        names: set[str] = set()
        for pool in {(d.driver, d.pool) for d in inp.devices}:
            rules = await self.api.list_taint_rules(f"{holders.POOL}={holders.pool_label(*pool)}")
            names.update(str((r.get("metadata") or {}).get("name")) for r in rules)
        return [d.resource_id for d in inp.devices if d.object_name not in names]

    @activity.defn(name="devices_without_own_rule")
    async def devices_without_own_rule(self, inp: PoolDevicesInput) -> list[str]:
        """The devices (resource ids) that have no DeviceTaintRule of their own."""
        return await self._without_own_rule(inp)
