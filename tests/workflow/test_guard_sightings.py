"""The ingest tells the fleet guard of a storm's failed devices as their events arrive, and the guard
trips on them before any incident has asked it (``workers/ingest/guard_sightings.py``).

The time-skipping server; a worker runs only the guard and the fleet incident, so nothing but the
ingest's sightings can count a device: the incidents and pool fences it starts are left unworked
(on a server of this module's own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from podmedic.domain.fleet_guard.messages import FleetSize
from podmedic.domain.models import DeviceRef, Health
from podmedic.domain.policy_file import PolicySet, parse_policy
from tests.helpers import assert_eventually
from tests.workflow.fakes import event, incident_worker
from tests.workflow.guard_helpers import FleetOf, guard_handle, guard_status
from tests.workflow.operator_helpers import own_time_skipping_env
from workers.ingest.dedup import RecentStates
from workers.ingest.delivery import Deliverer
from workers.ingest.guard_sightings import GuardSightings, counts_toward_storm
from workflows.fleet.guard import FleetGuardWorkflow
from workflows.fleet.incident import FleetIncidentState, FleetIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

DRIVER = "gpu.nvidia.com"
# The ingest's storm begins at the third device a minute; the guard's at 15 % of 20 devices, i.e. 3.
POLICY = """
guard: {storm: {share: 0.15, window_s: 300, min_devices: 3, clear_s: 600}, max_driver_share: 1}
drivers:
  default:
    detection: {storm_fence: {devices: 3, window_s: 60}}
    classification: {codes: {permanent: [79], container_code: [31]}}
"""


@pytest_asyncio.fixture(loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh server per test: the guard is one workflow per namespace, and unworked incidents stay."""
    async for server in own_time_skipping_env():
        yield server


def guard_only(client: Client, task_queue: str) -> tuple[Worker, FleetOf]:
    """A worker with the guard, its fleet incident and a fleet of 20 devices; no incident workflow."""
    sizes = FleetSize(drivers={DRIVER: 20}, pools={f"{DRIVER}/node-{n}": 4 for n in range(5)})
    fleet = FleetOf(client, sizes)
    return incident_worker(client, task_queue, [FleetGuardWorkflow, FleetIncidentWorkflow],
                           [fleet.ask_guard, fleet.release_guard, fleet.closed_holders, fleet.fleet_size,
                            fleet.sweep_taint_rules]), fleet


def device(n: int) -> DeviceRef:
    return DeviceRef(driver=DRIVER, pool=f"node-{n}", device="gpu-0")


async def test_in_a_storm_the_ingest_trips_the_guard_before_any_incident_asks(env: WorkflowEnvironment,
                                                                              task_queue: str) -> None:
    client, rules = env.client, parse_policy(POLICY)
    sightings = GuardSightings(client, task_queue, search_attributes=False)
    worker, fleet = guard_only(client, task_queue)
    async with worker:
        for n in range(2, 5):
            assert await sightings.tell(event(code=79, event_id=f"e{n}", device=device(n)), rules.for_driver(DRIVER))
        status = await guard_status(client, expect="tripped")
        assert status.storm is not None
        fleet_incident = client.get_workflow_handle_for(FleetIncidentWorkflow.run, status.storm.fleet_incident)

        async def started() -> FleetIncidentState:
            # The guard names its fleet incident when it trips and starts it as a child in the same task;
            # the server creates the child's execution a moment after the trip is visible to a query.
            try:
                return await fleet_incident.query(FleetIncidentWorkflow.get_state)
            except RPCError as err:
                raise AssertionError(f"fleet incident not started yet: {err}") from err

        record = await assert_eventually(started, timeout=10)
    assert status.storm.unhealthy == 3 and status.storm.fleet == 20
    assert status.storm.devices == [device(n).workflow_id for n in (2, 3, 4)]
    assert fleet.asks == 0  # no incident asked: the sightings alone tripped it
    assert record.open and "3 of 20 gpu.nvidia.com devices (15%)" in record.storm.summary
    assert sightings.told == 3 and sightings.waiting == 0


async def test_what_an_incidents_ask_would_not_count_is_not_sighted(env: WorkflowEnvironment,
                                                                    task_queue: str) -> None:
    client = env.client
    sightings = GuardSightings(client, task_queue, search_attributes=False)

    def driver(policy: str) -> PolicySet:
        return parse_policy(policy)

    rules = driver(POLICY)
    policy = rules.for_driver(DRIVER)
    not_counted = {
        "the workload's own fault (XID 31, container_code)": (event(code=31), policy),
        "a report that names no failure (it waits for corroboration)": (event(), policy),
        "good news": (event(Health.HEALTHY, code=79), policy),
        "dry run": (event(code=79), driver(POLICY + "    dry_run: true\n").for_driver(DRIVER)),
        "no guard": (event(code=79), driver(POLICY.replace("guard: ", "# ")).for_driver(DRIVER)),
        "storm rule off": (event(code=79), driver(POLICY.replace("{storm: {", "{storm: {enabled: false, "))
                           .for_driver(DRIVER)),
    }
    for why, (report, under) in not_counted.items():
        assert not counts_toward_storm(report, under), why
        assert not await sightings.tell(report, under), why
    with pytest.raises(RPCError):  # nothing was sent: no guard was started
        await guard_handle(client).describe()
    assert counts_toward_storm(event(code=79), policy)


async def test_the_ingest_sights_the_devices_of_its_storm(env: WorkflowEnvironment, task_queue: str) -> None:
    """Through the ingest's ``Deliverer``: its storm begins at the third device; from then on each device
    is sighted (the incidents and pool fences it starts have no worker here)."""
    client, rules = env.client, parse_policy(POLICY)
    deliverer = Deliverer(client, rules, task_queue, dedup=RecentStates(300.0, 1000), search_attributes=False)
    worker, fleet = guard_only(client, task_queue)
    async with worker:
        for n in range(5):
            await deliverer.deliver(event(code=79, event_id=f"e{n}", device=device(n)))
        status = await guard_status(client, expect="tripped")
    assert status.storm is not None and status.storm.devices == [device(n).workflow_id for n in (2, 3, 4)]
    assert fleet.asks == 0 and deliverer.sightings.told == 3
