"""Keeping warm spares (``podmedic/domain/spares.py``): the fleet guard's activity, run every ``spares.every_s``.

It reads the nodes, ResourceSlices, claims and DeviceTaintRules once, plans, and writes each node's change
at the version it was planned on. A change the API refuses (a concurrent edit: ``Conflict``; a node gone)
is reported and planned again next time, never forced. Running it twice changes nothing the second time.
"""

from __future__ import annotations

import datetime as dt

from temporalio import activity

from activities.base import KubeActivities
from podmedic.domain.spares import Fleet, SparesInput, SparesReport, plan_spares, spare_patch
from podmedic.kube.gateway import KubeError


class SpareActivities(KubeActivities):
    """Warm spares, over one gateway."""

    @activity.defn(name="keep_spares")
    async def keep_spares(self, inp: SparesInput) -> SparesReport:
        """Make and give back spares so that every pool has ``per_pool`` fit, unused ones; what changed."""
        api = self.api
        fleet = Fleet(await api.list_nodes(), await api.list_slices(), await api.list_claims(),
                      await api.list_taint_rules())
        changes, pools = plan_spares(fleet, inp.policy)
        nodes = {n["metadata"]["name"]: n for n in fleet.nodes}
        report = SparesReport(pools=pools)
        now = dt.datetime.now(dt.UTC)
        for change in changes:
            body = spare_patch(nodes[change.node], change, inp.policy.pool_label, now)
            line = f"{change.action} spare {change.node} (pool {change.pool}): {change.why}"
            try:
                await api.patch_node(change.node, body)
            except KubeError as err:
                report.refused.append(f"{line}: refused ({err}); planned again next time")
                for pool in report.pools:  # a spare not made is not held
                    if change.action == "add" and change.node in pool.spares:
                        pool.spares.remove(change.node)
                        pool.short += 1
                continue
            report.changed.append(line)
        return report
