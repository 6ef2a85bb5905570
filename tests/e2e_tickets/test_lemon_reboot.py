"""A lemon stays out across a reboot (issue 51, mechanism 5), end to end: the real worker and ingest, the
Temporal dev server's visibility (the device's earlier incident, no fake), the simulator and the vendor desk.

A reboot restarts the DRA driver's plugin, which forgets the taint it had published (KEP-5055: a driver's
taints live in the ResourceSlice it writes) and reads the GPU Healthy again; podmedic's DeviceTaintRule is an
API object and outlives the reboot. A device that is no repeat offender goes back into service on the
Healthy report, and its open ticket is told so (mechanism 6); one that failed ``repeat_offenders.incidents``
times stays out, its rule kept, until the vendor's fix is verified.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from podmedic.domain.incident import Phase
from podmedic.domain.models import Outcome
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk
from tests.e2e_tickets.conftest import SECRETS
from tests.e2e_tickets.helpers import (
    outcome,
    policy,
    replaced_and_seen_by_the_agent,
    unused_device,
    vendor_word_taken,
)
from tests.helpers import assert_eventually
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _rules_for(sim: SimCluster, device: str) -> list[dict[str, Any]]:
    driver, pool, name = device.split("/")
    return [r for r in sim.state()["taint_rules"]
            if (r.get("spec", {}).get("deviceSelector") or {}) == {"driver": driver, "pool": pool, "device": name}]


def _reboot(sim: SimCluster, device: str) -> None:
    """The node reboots: its GPU reads Healthy again (the fault is in the silicon, not the driver's state)."""
    driver, pool, name = device.split("/")
    sim.set_device_health(driver, pool, name, "Healthy", reason="NodeRebooted", message="node rebooted")


async def test_a_lemon_rebooted_healthy_stays_out_until_the_vendor_fixes_it(
        sim: SimCluster, worker: Client, ingest: Any, fakes: Any, taken: set[str]) -> None:
    desk = VendorDesk(secret=SECRETS["PODMEDIC_TICKET_SECRET"])
    url = await fakes(desk)
    front = await ingest(policy(f'url: "{url}/tickets"', wait_resolution_s=120,
                                extra="repeat_offenders: {incidents: 2, window_s: 3600}"))
    device = await unused_device(worker, sim, taken)

    # The first failure: no repeat offender yet, so the Healthy report after the reboot gives it back.
    await front.fail(device)
    await assert_eventually(lambda: _awaiting_vendor(worker, device), timeout=30)
    _reboot(sim, device)
    await front.fail(device, code=None, message="node rebooted", health="Healthy")
    first = await outcome(worker, device)
    assert first.outcome is Outcome.CLEARED and first.taint_removed, first.explanation
    # Its ticket is told, so the vendor does not chase a repair the reboot made unneeded (mechanism 6).
    [told] = [u["note"] for u in desk.tickets[str(first.ticket_id)].get("updates", [])]
    assert f"{device} is back in service" in told and "neither flapping nor a repeat offender" in told, told

    async def visible() -> None:  # the next incident counts this one through visibility
        runs = [wf async for wf in worker.list_workflows(f"WorkflowId = 'device/{device}' AND "
                                                          "ExecutionStatus = 'Completed'")]
        assert len(runs) == 1 and all(wf.typed_search_attributes for wf in runs)
    await assert_eventually(visible, timeout=15)

    # The second failure makes it a lemon: the reboot's Healthy report is told, and ends nothing.
    driver, pool, name = device.split("/")
    sim.set_device_health(driver, pool, name, "Unhealthy", reason="XidError", code=79, message="XID 79 again")
    await front.fail(device, message="XID 79 again")
    await assert_eventually(lambda: _awaiting_vendor(worker, device), timeout=30)
    _reboot(sim, device)
    await front.fail(device, code=None, message="node rebooted", health="Healthy")
    handle = worker.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{device}")

    async def told() -> str:
        state = await handle.query(DeviceIncidentWorkflow.get_state)
        assert state.phase is Phase.AWAITING_VENDOR, (state.phase, state.timeline[-2:])
        lines = [t.message for t in state.timeline if "but it is a repeat offender (2 incidents" in t.message]
        assert lines, state.timeline[-2:]
        return lines[0]
    line = await assert_eventually(told, timeout=30)
    assert "it stays out, DeviceTaintRule" in line, line
    assert _rules_for(sim, device), "the lemon's DeviceTaintRule went with the reboot"
    state = await handle.query(DeviceIncidentWorkflow.get_state)
    assert state.repeat_offender and state.ticket_id and not state.taint_removed

    # Only the vendor's fix, verified on the device, gives it back.
    status, _ = await front.resolved(state.ticket_id, {"by": "acme-rma", "note": "board swapped"})
    assert status == 202, status
    await vendor_word_taken(worker, device)
    await replaced_and_seen_by_the_agent(sim, front, device)
    second = await outcome(worker, device)
    assert second.outcome is Outcome.RESOLVED_BY_VENDOR, second.explanation
    assert second.taint_removed and not _rules_for(sim, device)
    assert not [u for u in desk.tickets[str(second.ticket_id)].get("updates", []) if u.get("note")], \
        "the lemon's ticket was told it is back in service"


async def _awaiting_vendor(worker: Client, device: str) -> None:
    handle = worker.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{device}")
    assert (await handle.query(DeviceIncidentWorkflow.get_state)).phase is Phase.AWAITING_VENDOR
