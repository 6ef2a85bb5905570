"""The hold-out's flapping device on the real stack: CloudEvents through the ingest's HTTP front, the real
worker, the dev server, and a webhook ticket desk that never resolves by itself.

A CloudEvent (``io.podmedic.device.health.v1``) alternates Unhealthy (XID 94) and Healthy every 2.8 s, 20
of them. The device is flapping (the default rule: 4 health changes within 10 minutes), so it is one
incident with one ticket while the ticket is open: its Healthy reports neither end the vendor wait nor open
a new run, and no outcome claims a resolution nobody made. Once the desk resolves the ticket and the
device reads Healthy, the incident ends resolved by the vendor.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from podmedic.domain.incident import Phase
from podmedic.domain.models import Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk
from tests.e2e_tickets.conftest import SECRETS
from tests.e2e_tickets.helpers import free_device, outcome
from tests.helpers import assert_eventually
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
REPORTS, APART_S = 20, 2.8
ANTI_FLAP_S = 6.0


def _policy(url: str) -> Any:
    # The heal wait and anti-flap delay span a few reports, as the shipped ones (600 s, 300 s) span many:
    # a Healthy report alone does not close the incident before the device is seen to flap.
    return parse_policy(f"""
drivers:
  default:
    checkpoint: {{timeout_s: 3, poll_s: 0.2}}
    close: {{heal_wait_s: 30, anti_flap_s: {ANTI_FLAP_S:g}, poll_s: 0.3}}
    ticket: {{url: "{url}/tickets", poll_s: 0.5, poll_max_s: 2, wait_resolution_s: 600, verify_s: 10}}
  gpu.nvidia.com:
    detection: {{corroborate_s: 0}}
""")


async def test_a_flapping_device_is_one_incident_with_one_ticket_until_the_vendor_resolves_it(
        sim: SimCluster, worker: Client, ingest: Any, fakes: Any, taken: set[str]) -> None:
    desk = VendorDesk(secret=SECRETS["PODMEDIC_TICKET_SECRET"])
    front = await ingest(_policy(await fakes(desk)))
    device = free_device(sim, taken)
    workflow_id = f"device/{device}"
    for n in range(REPORTS):
        unhealthy = n % 2 == 0
        # The last Healthy report comes once the anti-flap check of the one before it is over, so the wait
        # reads it as news: a wait that a flapping device's Healthy report could end would end on it.
        await asyncio.sleep(0 if n == 0 else APART_S if n < REPORTS - 1 else ANTI_FLAP_S + 2)
        await front.fail(device, code=94 if unhealthy else None,
                         message="XID 94: contained ECC error" if unhealthy else "device recovered",
                         health="Unhealthy" if unhealthy else "Healthy")
    # Held Healthy past the anti-flap delay: the hold-out saw the incident close within about 12 s here.
    await asyncio.sleep(ANTI_FLAP_S + 4)

    handle = worker.get_workflow_handle_for(DeviceIncidentWorkflow.run, workflow_id)
    state = await handle.query(DeviceIncidentWorkflow.get_state)
    for t in state.timeline:
        print("TL", t.at, t.step, t.message[:160])
    assert state.flapping and state.phase is Phase.AWAITING_VENDOR, (state.phase, state.timeline[-3:])
    assert state.events_seen == REPORTS, state.events_seen
    runs = [wf async for wf in worker.list_workflows(f"WorkflowId = '{workflow_id}'")]
    assert len(runs) == 1, [(r.run_id, r.status) for r in runs]
    assert len(desk.tickets) == 1, desk.tickets
    claims = [t.message for t in state.timeline if "resolved" in t.message and "vendor" in t.message]
    assert not claims, claims  # nobody resolved anything yet

    driver, pool, name = device.split("/")
    sim.set_device_health(driver, pool, name, "Healthy")
    ticket = next(iter(desk.tickets.values()))
    await desk._resolve(ticket)  # the desk's own resolution: its callback to the ingest, as a vendor's
    closed = await outcome(worker, device, timeout=60)
    assert closed.outcome is Outcome.RESOLVED_BY_VENDOR, closed.explanation
    assert f"ticket {closed.ticket_id} resolved by " in closed.explanation
    assert len(desk.tickets) == 1

    async def one_run() -> None:
        assert len([wf async for wf in worker.list_workflows(f"WorkflowId = '{workflow_id}'")]) == 1
    await assert_eventually(one_run, timeout=10)
