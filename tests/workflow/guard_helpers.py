"""Helpers of the fleet guard's workflow tests: a worker with the guard, fleet sizes, status."""

from __future__ import annotations

import datetime as dt
from typing import cast

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities.fleet_guard import GuardActivities
from activities.node import NodeActivities
from podmedic.domain.fleet_guard.messages import (
    GUARD_WORKFLOW_ID,
    FleetSize,
    FleetSizeInput,
    GuardStatus,
    PermitAnswer,
    PermitRequest,
    SweepInput,
    SweepReport,
)
from podmedic.kube.gateway import KubeGateway
from tests.helpers import assert_eventually
from tests.workflow.fakes import FakeCluster, incident_worker
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.fleet.guard import FleetGuardWorkflow
from workflows.fleet.incident import FleetIncidentWorkflow
from workflows.node.incident import NodeIncidentWorkflow


class FleetOf(GuardActivities):
    """The real ask/release activities (they talk to the test server); fleet sizes as set."""

    def __init__(self, client: Client, sizes: FleetSize) -> None:
        super().__init__(client, cast(KubeGateway, None))
        self.sizes = sizes
        self.asks = 0
        self.sweeps = 0

    @activity.defn(name="fleet_size")
    async def fleet_size(self, inp: FleetSizeInput) -> FleetSize:
        return self.sizes.model_copy(update={"read_at": dt.datetime.now(dt.UTC)})

    @activity.defn(name="ask_guard")
    async def ask_guard(self, req: PermitRequest) -> PermitAnswer:
        self.asks += 1
        return await super().ask_guard(req)

    @activity.defn(name="sweep_taint_rules")
    async def sweep_taint_rules(self, inp: SweepInput) -> SweepReport:
        """The fake cluster keeps no DeviceTaintRules: nothing to sweep (tests/e2e_guard sweeps real ones)."""
        self.sweeps += 1
        return SweepReport()


def guard_worker(client: Client, task_queue: str, fake: FakeCluster, fleet: FleetOf) -> Worker:
    """Incidents, node watches, the guard and the fleet incident, on the fake cluster (the node
    watch reached through the real activities)."""
    real = NodeActivities(client)
    names = {"report_to_node", "device_incidents_status", "request_node_quarantine"}
    activities = [a for a in fake.activities() if getattr(a, "__name__", "") not in names]
    return incident_worker(client, task_queue,
                           [DeviceIncidentWorkflow, NodeIncidentWorkflow, FleetGuardWorkflow, FleetIncidentWorkflow],
                           [*activities, real.report_to_node, real.device_incidents_status,
                              real.request_node_quarantine, fleet.ask_guard, fleet.release_guard,
                              fleet.closed_holders, fleet.fleet_size, fleet.sweep_taint_rules])


def guard_handle(client: Client) -> WorkflowHandle[FleetGuardWorkflow, None]:
    """The namespace's guard."""
    return client.get_workflow_handle_for(FleetGuardWorkflow.run, GUARD_WORKFLOW_ID)


async def guard_status(client: Client, *, expect: str | None = None, permits: int | None = None,
                       waiting: int | None = None, timeout: float = 30) -> GuardStatus:
    """Query the guard until it matches what is expected."""
    async def check() -> GuardStatus:
        try:
            status = await guard_handle(client).query(FleetGuardWorkflow.status)
        except RPCError as err:
            raise AssertionError(f"no guard yet: {err}") from err
        assert expect is None or status.state == expect, status.state
        assert permits is None or status.devices_tainted == permits, status.devices_tainted
        assert waiting is None or len(status.waiting) == waiting, status.waiting
        return status

    return await assert_eventually(check, timeout=timeout)
