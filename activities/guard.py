"""The fleet guard's side effects: asking and releasing (Temporal), and fleet sizes (ResourceSlices).

``ask_guard`` starts the guard if it is not running (``USE_EXISTING``), then sends the ``ask``
update, so the first incident of a fresh namespace brings the guard up; asking twice for the
same step is harmless (a holder is granted again, an observation counted once per incident).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import defaultdict

from temporalio import activity
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from activities.kube import KubeGateway
from podmedic.guard import (
    GUARD_WORKFLOW_ID,
    FleetSize,
    FleetSizeInput,
    GuardInput,
    PermitAnswer,
    PermitRelease,
    PermitRequest,
)
from podmedic.telemetry import set_guard_state

GUARD_WORKFLOW = "FleetGuard"  # by name: the guard workflow imports this module


class GuardActivities:
    """Bound to one Temporal client and one cluster."""

    def __init__(self, client: Client, kube: KubeGateway) -> None:
        self.client = client
        self.kube = kube

    @activity.defn(name="ask_guard")
    async def ask_guard(self, req: PermitRequest) -> PermitAnswer:
        """The guard's answer to one incident's step (starting the guard when none runs)."""
        handle = await self.client.start_workflow(
            GUARD_WORKFLOW, GuardInput(policy=req.policy, search_attributes=req.search_attributes),
            id=GUARD_WORKFLOW_ID, task_queue=activity.info().task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary="fleet guard: blast-radius limits and storm breaker",
        )
        answer: PermitAnswer = await handle.execute_update("ask", req, result_type=PermitAnswer)
        set_guard_state("tripped" if answer.tripped else "dry_run" if req.probe else "ok",
                        devices_tainted=answer.devices_tainted, nodes_disrupted=answer.nodes_disrupted)
        return answer

    @activity.defn(name="release_guard")
    async def release_guard(self, rel: PermitRelease) -> bool:
        """Give back an incident's permit; False when no guard runs (nothing was held)."""
        try:
            await self.client.get_workflow_handle(GUARD_WORKFLOW_ID).signal("release", rel)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    @activity.defn(name="fleet_size")
    async def fleet_size(self, inp: FleetSizeInput) -> FleetSize:
        """Devices per driver and per pool (distinct names: a pool may span several slices)."""
        selector = f"spec.driver={inp.driver}" if inp.driver else ""
        slices = await asyncio.to_thread(self.kube.list_slices, selector)
        pools: dict[str, set[str]] = defaultdict(set)
        for rslice in slices:
            spec = rslice.get("spec") or {}
            driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name")
            if not driver or not pool:
                continue
            pools[f"{driver}/{pool}"].update(d.get("name", "") for d in spec.get("devices") or [])
        drivers: dict[str, int] = defaultdict(int)
        for key, names in pools.items():
            drivers[key.split("/", 1)[0]] += len(names)
        return FleetSize(drivers=dict(drivers), pools={k: len(v) for k, v in pools.items()},
                         read_at=dt.datetime.now(dt.UTC))
