"""Record the fleet guard's histories for the replay test (tests/replay/test_replay.py).

The demo runs without a guard, so ``record.py`` cannot find these: this runs the scenarios of
tests/workflow/test_guard.py on a time-skipping server and saves a throttled device incident,
the guard through a storm and its resume, and the fleet incident, beside the histories on file
(never over them). Record after an intended, versioned change of the guard's workflows:

    .venv/bin/python -m tests.replay.record_guard
"""

from __future__ import annotations

import asyncio
import json

from temporalio.client import Client

from podmedic.domain.fleet_guard.messages import ResumeRequest
from podmedic.domain.incident import AbortRequest, Phase
from podmedic.domain.models import Health
from tests.replay.record import new_history_path
from tests.workflow.fakes import FakeCluster
from tests.workflow.guard_helpers import guard_handle, guard_status, guard_worker
from tests.workflow.operator_helpers import open_incident, outcome_of, own_time_skipping_env, state_in
from tests.workflow.test_guard import STORM, _storm, device, fleet, policy
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.fleet.guard import FleetGuardWorkflow


async def save(client: Client, workflow_id: str, name: str) -> None:
    """Write the latest run's history of ``workflow_id`` as a new file for ``name``."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    new_history_path(name).write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")


async def main() -> None:
    """Run both scenarios, each on its own server (the guard is one per namespace)."""
    async for env in own_time_skipping_env():
        client, fake = env.client, FakeCluster()
        fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
        rules = policy("{max_devices_tainted: 1, retry_s: 600}")
        tq = "tq-rec"
        async with guard_worker(client, tq, fake, fleet(client)):
            first = await open_incident(client, tq, device(0, 0), rules)
            await state_in(first, Phase.AWAITING_VENDOR)
            second = await open_incident(client, tq, device(1, 0), rules)
            await state_in(second, Phase.THROTTLED)
            await first.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="ops", reason="frees it"))
            await outcome_of(env, first)
            await state_in(second, Phase.AWAITING_VENDOR)
            await second.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="ops", reason="done"))
            await outcome_of(env, second)
            await save(client, second.id, "device_guard_throttled")
    fake2 = FakeCluster()
    fake2.health, fake2.ticket_state = Health.UNHEALTHY, "open"
    async for env in own_time_skipping_env():
        client = env.client
        async with guard_worker(client, "tq-rec2", fake2, fleet(client, devices=20)):
            await _storm(env, "tq-rec2", fake2, policy(STORM), 6)
            status = await guard_status(client, expect="tripped")
            assert status.storm is not None
            await guard_handle(client).execute_update(FleetGuardWorkflow.resume, ResumeRequest(by="erin", reason="ok"))
            rec = client.get_workflow_handle(status.storm.fleet_incident)
            await rec.result()
            await guard_status(client, expect="ok")
            await asyncio.sleep(2)
            await save(client, "fleet/guard", "fleet_guard_storm")
            await save(client, status.storm.fleet_incident, "fleet_incident")
if __name__ == "__main__":
    asyncio.run(main())
