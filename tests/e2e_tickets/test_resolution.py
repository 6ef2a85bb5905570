"""End to end: a ticket filed with the evidence, resolved by the authenticated callback or by
polling the backend; the incident verifies the device and untaints (dev server, worker, simulator)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from podmedic.domain.incident import ApprovalRequest, PendingApproval, Phase
from podmedic.domain.models import Outcome
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk
from podmedic_sim.vendors.jira import FakeJira
from podmedic_sim.vendors.servicenow import FakeServiceNow
from tests.e2e_tickets.conftest import INGEST_TOKEN, SECRETS
from tests.e2e_tickets.helpers import (
    assert_no_secret,
    free_device,
    outcome,
    policy,
    replaced_and_seen_by_the_agent,
    start_job,
    vendor_word_taken,
)
from tests.helpers import assert_eventually
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _split(device: str) -> tuple[str, str, str]:
    driver, pool, name = device.split("/")
    return driver, pool, name


def _rules_for(sim: SimCluster, device: str) -> list[dict[str, Any]]:
    driver, pool, name = _split(device)
    return [r for r in sim.state()["taint_rules"]
            if (r.get("spec", {}).get("deviceSelector") or {}) == {"driver": driver, "pool": pool, "device": name}]


async def test_callback_resolves_verifies_and_untaints(sim: SimCluster, worker: Client, ingest: Any, fakes: Any,
                                                      taken: set[str]) -> None:
    desk = VendorDesk(secret=SECRETS["PODMEDIC_TICKET_SECRET"])
    url = await fakes(desk)
    front = await ingest(policy(f'url: "{url}/tickets"'))
    pod = await start_job(sim)
    device = pod["devices"][0]
    taken.add(device)
    await front.fail(device)

    async def filed() -> dict[str, Any]:
        assert len(desk.tickets) == 1, desk.rejected
        return next(iter(desk.tickets.values()))
    ticket = await assert_eventually(filed, timeout=30)
    ev = ticket["evidence"]
    assert ev["device"]["device"] == device.split("/")[2] and ev["device_slice"]["attributes"], ev
    assert [e["code"] for e in ev["events"]] == [79] and ev["permanence"] == "permanent"
    assert any(pod["name"] in p for p in ev["pods"]), ev["pods"]
    assert any(a["step"] == "taint" for a in ev["actions"]) and ev["taint_rule"]
    # Earlier runs of this workflow id (other test packages reuse device names on the same server) only.
    assert all(p["run_id"] != ev["run_id"] for p in ev["previous_incidents"]) and "checkpoint_ids" in ev
    assert _rules_for(sim, device), "the device is tainted while the ticket is open"

    assert (await front.resolved(ticket["id"], token="wrong"))[0] == 401
    assert (await front.resolved("bad'id"))[0] in (400, 404)
    assert (await front.resolved("VND-9999"))[0] == 404
    status, body = await front.resolved(ticket["id"], {"by": 7})
    assert status == 400 and body["what"] == "by", body
    status, body = await front.resolved(ticket["id"], {"who": "x"})
    assert status == 400 and body["what"] == ["who"], body

    async def delivered() -> dict[str, Any]:
        status, body = await front.resolved(ticket["id"], {"by": "acme-rma", "note": "board swapped"})
        assert status == 202, (status, body)  # 404 until visibility shows the incident's PodmedicTicket
        return body
    answer = await assert_eventually(delivered, timeout=20)
    assert answer["incidents"] == [f"device/{device}"] and answer["by"] == "acme-rma"
    # The swapped GPU is seen after the vendor's word, which it then verifies.
    await vendor_word_taken(worker, device)
    await replaced_and_seen_by_the_agent(sim, front, device)

    result = await outcome(worker, device)
    assert result.outcome is Outcome.RESOLVED_BY_VENDOR, result.explanation
    assert "resolved by acme-rma" in result.explanation and result.ticket_id == ticket["id"]
    assert any(t.message.startswith("device verified") for t in result.timeline)
    assert result.taint_removed and not _rules_for(sim, device)
    assert (await front.resolved(ticket["id"]))[0] == 404  # closed: no open incident has the ticket
    await assert_no_secret(worker, device, [*SECRETS.values(), INGEST_TOKEN], known=ticket["id"])


async def test_resolved_but_still_unhealthy_keeps_the_taint(sim: SimCluster, worker: Client, ingest: Any,
                                                           fakes: Any, taken: set[str]) -> None:
    desk = VendorDesk()
    url = await fakes(desk)
    front = await ingest(policy(f'url: "{url}/tickets"'))
    device = free_device(sim, taken)
    await front.fail(device)
    ticket = await assert_eventually(lambda: _only(desk.tickets), timeout=30)
    # The driver still reports the device broken: the vendor's word alone must not untaint it.
    sim.set_slice_taint(*_split(device), key="gpu.nvidia.com/xid", value="79")
    status = await assert_eventually(lambda: _accepted(front, ticket["id"]), timeout=20)
    assert status == 202
    result = await outcome(worker, device)
    assert result.outcome is Outcome.QUARANTINED and "did not verify healthy" in result.explanation
    assert not result.taint_removed and _rules_for(sim, device)


async def _only(tickets: dict[str, Any]) -> dict[str, Any]:
    assert len(tickets) == 1
    return dict(next(iter(tickets.values())))


async def _accepted(front: Any, ticket: str) -> int:
    status, body = await front.resolved(ticket)
    assert status == 202, body
    return int(status)


@pytest.mark.parametrize("backend", ["jira", "servicenow"])
async def test_polling_the_backend_resolves(sim: SimCluster, worker: Client, ingest: Any, fakes: Any,
                                            taken: set[str], backend: str) -> None:
    if backend == "jira":
        fake: Any = FakeJira(project="GPU", email="bot@example.com", token=SECRETS["PODMEDIC_JIRA_TOKEN"])
        url = await fakes(fake)
        settings = f'backend: jira, jira: {{url: "{url}", project: GPU, email: bot@example.com, api_version: "3"}}'
    else:
        fake = FakeServiceNow(user="podmedic", password=SECRETS["PODMEDIC_SERVICENOW_PASSWORD"])
        url = await fakes(fake)
        settings = f'backend: servicenow, servicenow: {{url: "{url}", user: podmedic}}'
    front = await ingest(policy(settings))
    device = free_device(sim, taken)
    await front.fail(device)
    ticket = await assert_eventually(lambda: _only(fake.tickets), timeout=30)
    ticket_id = ticket.get("key") or ticket["number"]
    assert fake.rejected == []
    await fake.resolve(ticket_id)

    async def polled() -> None:
        state = await worker.get_workflow_handle(f"device/{device}").query(DeviceIncidentWorkflow.get_state)
        assert any(f"backend reports ticket {ticket_id} resolved" in t.message for t in state.timeline)
    await assert_eventually(polled, timeout=20)
    # Verifying now: the replaced GPU is idle, so only the node agent's report can verify it.
    await replaced_and_seen_by_the_agent(sim, front, device)
    result = await outcome(worker, device)
    assert result.outcome is Outcome.RESOLVED_BY_VENDOR, result.explanation
    assert result.ticket_id == ticket_id and result.taint_removed and not _rules_for(sim, device)
    assert any(f"backend reports ticket {ticket_id} resolved" in t.message for t in result.timeline)
    await assert_no_secret(worker, device, list(SECRETS.values()), known=ticket_id)


async def _resolved_unseen(sim: SimCluster, ingest: Any, fakes: Any, taken: set[str],
                           approvals_timeout_s: float = 3600) -> tuple[str, str, Any]:
    """A ticketed device replaced with no node agent running: after the vendor's word nothing can see it
    (no pod uses it, no driver taint), so it reads Unknown, which says nothing about the new GPU."""
    desk = VendorDesk()
    url = await fakes(desk)
    front = await ingest(policy(f'url: "{url}/tickets"', approvals_timeout_s=approvals_timeout_s))
    device = free_device(sim, taken)
    await front.fail(device)
    ticket = await assert_eventually(lambda: _only(desk.tickets), timeout=30)
    sim.set_device_health(*_split(device), "Healthy", reason="DeviceReplaced")
    assert await assert_eventually(lambda: _accepted(front, ticket["id"]), timeout=20) == 202
    return device, ticket["id"], front


async def _pending_untaint(worker: Client, device: str) -> PendingApproval:
    state = await worker.get_workflow_handle(f"device/{device}").query(DeviceIncidentWorkflow.get_state)
    assert state.phase is Phase.AWAITING_APPROVAL and state.pending_approval, (state.phase, state.doing)
    return state.pending_approval


async def test_a_device_nothing_can_see_keeps_its_taint_until_an_operator_approves(
        sim: SimCluster, worker: Client, ingest: Any, fakes: Any, taken: set[str]) -> None:
    device, ticket, _ = await _resolved_unseen(sim, ingest, fakes, taken)
    pending = await assert_eventually(lambda: _pending_untaint(worker, device), timeout=30)
    assert pending.step == "untaint" and "nothing that can see the device" in pending.action, pending
    assert _rules_for(sim, device), "the taint stays while nobody has seen the new device"
    handle = worker.get_workflow_handle(f"device/{device}")
    await handle.execute_update(DeviceIncidentWorkflow.approve,
                                ApprovalRequest(step="untaint", by="alice", note="swap confirmed on site"))
    result = await outcome(worker, device)
    assert result.outcome is Outcome.RESOLVED_BY_VENDOR and result.taint_removed, result.explanation
    assert not _rules_for(sim, device)
    state = await handle.query(DeviceIncidentWorkflow.get_state)
    assert [(d.step, d.decision, d.by) for d in state.decisions] == [
        ("resolve", "resolved", f"vendor (ticket {ticket})"), ("untaint", "approved", "alice")]
    assert any("approved by alice" in t.message for t in result.timeline)


async def test_a_device_nothing_can_see_stays_tainted_when_nobody_answers(
        sim: SimCluster, worker: Client, ingest: Any, fakes: Any, taken: set[str]) -> None:
    device, ticket, _ = await _resolved_unseen(sim, ingest, fakes, taken, approvals_timeout_s=2)
    result = await outcome(worker, device)
    assert result.outcome is Outcome.QUARANTINED and not result.taint_removed, result.explanation
    assert f"ticket {ticket} resolved but nothing that can see the device reported it Healthy" in result.explanation
    assert _rules_for(sim, device)
    assert any("no answer on untaint within 2s" in t.message for t in result.timeline)


async def test_a_healthy_report_while_asking_verifies_the_device(
        sim: SimCluster, worker: Client, ingest: Any, fakes: Any, taken: set[str]) -> None:
    device, _, front = await _resolved_unseen(sim, ingest, fakes, taken)
    await assert_eventually(lambda: _pending_untaint(worker, device), timeout=30)
    await front.fail(device, code=None, message="GPU 0 replaced; seen by NVML", health="Healthy")
    result = await outcome(worker, device)
    assert result.outcome is Outcome.RESOLVED_BY_VENDOR and result.taint_removed, result.explanation
    assert any("device verified: http reports it Healthy (GPU 0 replaced" in t.message for t in result.timeline), [
        t.message for t in result.timeline[-8:]]
