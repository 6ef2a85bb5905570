"""Each ticket backend against a real HTTP server speaking that system's API shape.

The activities run in Temporal's ``ActivityEnvironment`` (a real activity context); the
servers are the fakes in ``podmedic_sim/vendors/`` and the webhook desk, strict about auth
headers, HMAC signatures and body fields.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.tickets import TicketActivities, webhook
from activities.tickets.common import LEGACY_SIGNATURE_HEADER
from podmedic.domain.steps import TicketInput, TicketNoteInput, TicketStatusInput
from podmedic.domain.ticket_policy import JiraTicket, ServiceNowTicket, Ticket
from podmedic_sim.vendors.base import FakeDesk
from podmedic_sim.vendors.desk import VendorDesk
from podmedic_sim.vendors.jira import FakeJira
from podmedic_sim.vendors.servicenow import FakeServiceNow

pytestmark = pytest.mark.asyncio(loop_scope="session")

EVIDENCE: dict[str, Any] = {
    "incident": "device/gpu.nvidia.com/node-0001/gpu-3",
    "device": {"driver": "gpu.nvidia.com", "pool": "node-0001", "device": "gpu-3"},
    "node": "node-0001", "failure_mode": "device_failed", "permanence": "permanent",
    "events": [{"at": "2026-01-01T00:00:00+00:00", "health": "Unhealthy", "code": 79, "reason": "XidError",
                "message": "XID 79: fallen off the bus"}],
    "pods": ["default/train-0 (uid u1, node node-0001, job train)"], "checkpoint_ids": ["ckpt-1"],
    "actions": [{"at": "2026-01-01T00:00:01+00:00", "step": "taint", "message": "NoExecute"}],
}


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest_asyncio.fixture(loop_scope="session")
async def served() -> AsyncIterator[Any]:
    """Serve a fake: ``url = await served(fake)``; stopped after the test."""
    runners: list[web.AppRunner] = []

    async def start(fake: FakeDesk | VendorDesk) -> str:
        runner, url = await _serve(fake.app())
        runners.append(runner)
        return url

    yield start
    for runner in runners:
        await runner.cleanup()


def _input(ticket: Ticket, key: str = "device/x#run1#ticket#0") -> TicketInput:
    return TicketInput(incident_id=EVIDENCE["incident"], idempotency_key=key, url=ticket.url, evidence=EVIDENCE,
                       ticket=ticket)


async def _file(ticket: Ticket, key: str = "device/x#run1#ticket#0") -> Any:
    return await ActivityEnvironment().run(TicketActivities().file_ticket, _input(ticket, key))


async def _status(ticket: Ticket, ticket_id: str) -> str:
    inp = TicketStatusInput(url=ticket.url, ticket_id=ticket_id, ticket=ticket)
    return str(await ActivityEnvironment().run(TicketActivities().ticket_status, inp))


async def test_webhook_signs_the_body_and_files_once(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    desk = VendorDesk(secret="s3cret")
    url = await served(desk)
    monkeypatch.setenv("PODMEDIC_TICKET_SECRET", "s3cret")
    ticket = Ticket(url=f"{url}/tickets")
    first = await _file(ticket)
    again = await _file(ticket)
    assert first.filed and first.ticket_id == again.ticket_id and len(desk.tickets) == 1
    filed = desk.tickets[str(first.ticket_id)]
    assert filed["evidence"]["events"][0]["code"] == 79 and filed["evidence"]["checkpoint_ids"] == ["ckpt-1"]
    assert await _status(ticket, str(first.ticket_id)) == "open"
    await desk._resolve(filed)
    assert await _status(ticket, str(first.ticket_id)) == "resolved"


async def test_webhook_with_the_wrong_secret_is_refused(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    desk = VendorDesk(secret="right")
    url = await served(desk)
    monkeypatch.setenv("PODMEDIC_TICKET_SECRET", "wrong")
    with pytest.raises(ApplicationError) as err:
        await _file(Ticket(url=f"{url}/tickets"))
    assert err.value.type == "TicketRejected" and err.value.non_retryable and "401" in str(err.value)
    assert desk.tickets == {} and desk.rejected == ["webhook signature refused: No matching signature found"]


async def test_signature_is_standard_webhooks_over_id_timestamp_and_the_exact_body() -> None:
    """The spec's own check (https://www.standardwebhooks.com; its reference library ``standardwebhooks``):
    ``v1,`` and base64 HMAC-SHA256 of ``id.timestamp.body``; a ``whsec_`` secret is base64, any other
    text is its bytes; and a request older than 5 minutes is refused."""
    from standardwebhooks import Webhook, WebhookVerificationError

    from activities.tickets.common import legacy_sign, sign

    body = json.dumps({"a": 1}).encode()
    headers = sign("k", "msg_1", body)
    assert Webhook(b"k").verify(body, headers) == {"a": 1}
    mac = hmac.new(b"k", b"msg_1." + headers["webhook-timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["webhook-signature"] == "v1," + base64.b64encode(mac.digest()).decode()
    spec_secret = "whsec_" + base64.b64encode(b"0123456789abcdef").decode()
    assert Webhook(spec_secret).verify(body, sign(spec_secret, "msg_2", body)) == {"a": 1}
    stale = sign("k", "msg_1", body, now=time.time() - 600)
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(b"k").verify(body, stale)
    assert legacy_sign("k", body) == "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()


async def test_a_replayed_post_is_refused_and_the_legacy_header_only_on_request(
        served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A post captured and sent again ten minutes later (same body, same headers) is refused by the desk; the
    old header goes out only with ``legacy_signature``."""
    from activities.tickets.common import sign

    desk = VendorDesk(secret="right")
    url = await served(desk)
    monkeypatch.setenv("PODMEDIC_TICKET_SECRET", "right")
    filed = await _file(Ticket(url=f"{url}/tickets"))
    assert filed.filed and desk.rejected == []
    body = json.dumps({"idempotency_key": "k-replay", "title": "t", "incident": "i", "evidence": {}}).encode()
    old = {"Content-Type": "application/json", "Idempotency-Key": "k-replay",
           **sign("right", "msg_replay", body, now=time.time() - 600)}
    async with aiohttp.ClientSession() as session, session.post(f"{url}/tickets", data=body, headers=old) as answer:
        assert answer.status == 401
    assert desk.rejected == ["webhook signature refused: Message timestamp too old"]

    signed = webhook._signed(Ticket(url=url), "k", body, "create")
    assert "webhook-signature" in signed and LEGACY_SIGNATURE_HEADER not in signed
    both = webhook._signed(Ticket(url=url, legacy_signature=True), "k", body, "create")
    only_legacy = {"Content-Type": "application/json", "Idempotency-Key": "k-legacy",
                   LEGACY_SIGNATURE_HEADER: both[LEGACY_SIGNATURE_HEADER]}
    legacy = VendorDesk(secret="right", accept_legacy=True)
    for receiver, status in ((legacy, 200), (desk, 401)):
        receiver_url = url if receiver is desk else await served(legacy)
        async with aiohttp.ClientSession() as session, \
                session.post(f"{receiver_url}/tickets", data=body, headers=only_legacy) as answer:
            assert answer.status // 100 == status // 100, (receiver.accept_legacy, answer.status)


@pytest.mark.parametrize("version", ["2", "3"])
async def test_jira_creates_one_issue_per_incident_run(served: Any, monkeypatch: pytest.MonkeyPatch,
                                                      version: str) -> None:
    jira = FakeJira(project="OPS", email="bot@example.com", token="tok")
    url = await served(jira)
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "tok")
    ticket = Ticket(backend="jira", jira=JiraTicket(url=url, project="OPS", email="bot@example.com",
                                                    api_version=version, issue_type="Hardware"))
    first = await _file(ticket)
    again = await _file(ticket)  # a retry after a lost answer: found by label, not filed again
    assert jira.rejected == []
    assert first.ticket_id == again.ticket_id == "OPS-1" and len(jira.tickets) == 1 and jira.creates_received == 1
    fields = jira.tickets["OPS-1"]["fields"]
    assert fields["issuetype"] == {"name": "Hardware"} and "podmedic" in fields["labels"]
    assert "gpu.nvidia.com/node-0001/gpu-3" in fields["summary"]
    assert "XID 79: fallen off the bus" in jira.tickets["OPS-1"]["text"]
    assert await _status(ticket, "OPS-1") == "open"
    await jira.resolve("OPS-1")
    assert await _status(ticket, "OPS-1") == "resolved"


async def test_jira_bearer_pat_and_bad_token(served: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jira = FakeJira(token="pat-1", bearer=True)
    url = await served(jira)
    (tmp_path / "pat").write_text("pat-1\n")
    ticket = Ticket(backend="jira", jira=JiraTicket(url=url, project="OPS", auth="bearer",
                                                    token_file=str(tmp_path / "pat")))
    assert (await _file(ticket)).ticket_id == "OPS-1"
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "nope")
    with pytest.raises(ApplicationError, match="401"):
        await _file(Ticket(backend="jira", jira=JiraTicket(url=url, project="OPS", auth="bearer")), "k2")


async def test_jira_comments_once_on_the_devices_open_issue(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp

    from activities.tickets import jira as backend

    fake = FakeJira(token="tok")
    url = await served(fake)
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "tok")
    settings = JiraTicket(url=url, project="OPS", email="bot@example.com")
    async with aiohttp.ClientSession() as session:
        first = await backend.file(session, settings, "run-1", EVIDENCE, None)
        again = await backend.file(session, settings, "run-2", EVIDENCE, first.ticket_id)
        retried = await backend.file(session, settings, "run-2", EVIDENCE, first.ticket_id)
        assert again.reused and again.ticket_id == retried.ticket_id == "OPS-1"
        assert len(fake.tickets) == 1 and len(fake.comments["OPS-1"]) == 1
        await fake.resolve("OPS-1")
        third = await backend.file(session, settings, "run-3", EVIDENCE, "OPS-1")  # done: a new issue
        other = await backend.file(session, settings, "run-4", EVIDENCE, "VND-0001")  # not a Jira issue
    assert third.ticket_id == "OPS-2" and not third.reused
    assert other.ticket_id == "OPS-3" and not other.reused


async def test_servicenow_finds_its_record_by_correlation_id(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sn = FakeServiceNow(user="svc", password="pw")
    url = await served(sn)
    monkeypatch.setenv("SN_PASSWORD", "pw")
    ticket = Ticket(backend="servicenow", servicenow=ServiceNowTicket(url=url, user="svc", password_env="SN_PASSWORD",
                                                                      assignment_group="gpu-ops"))
    first = await _file(ticket)
    again = await _file(ticket)
    assert sn.rejected == [] and first.ticket_id == again.ticket_id == "INC0010001" and len(sn.tickets) == 1
    record = sn.tickets["INC0010001"]
    assert record["correlation_id"].startswith("podmedic-") and record["assignment_group"] == "gpu-ops"
    assert record["category"] == "hardware" and "XID 79" in record["description"]
    assert await _status(ticket, "INC0010001") == "open"
    await sn.resolve("INC0010001")
    assert await _status(ticket, "INC0010001") == "resolved"


async def test_missing_credentials_name_the_field(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PODMEDIC_SERVICENOW_PASSWORD", raising=False)
    ticket = Ticket(backend="servicenow", servicenow=ServiceNowTicket(url="http://127.0.0.1:9", user="u"))
    with pytest.raises(ApplicationError) as err:
        await _file(ticket)
    assert err.value.type == "TicketConfigError" and err.value.non_retryable
    assert "ticket.servicenow.password" in str(err.value) and "PODMEDIC_SERVICENOW_PASSWORD" in str(err.value)
    ticket = Ticket(backend="jira", jira=JiraTicket(url="http://127.0.0.1:9", project="P", email="e",
                                                    token_file=str(tmp_path / "absent")))
    with pytest.raises(ApplicationError, match=r"ticket.jira.token_file .*absent: cannot read"):
        await _file(ticket)


async def test_webhook_adds_to_the_episodes_open_ticket_once_per_run(served: Any) -> None:
    """The webhook update (``POST <url>/<id>/updates``, docs/recovery-tickets.md) is kept once per
    Idempotency-Key, so a retried activity adds nothing twice; a resolved or unknown ticket gets a new one."""
    import aiohttp

    from activities.tickets import webhook as backend

    desk = VendorDesk()
    ticket = Ticket(url=f"{await served(desk)}/tickets")
    async with aiohttp.ClientSession() as session:
        first = await backend.file(session, ticket, "inc", "run-1", EVIDENCE)
        again = await backend.file(session, ticket, "inc", "run-2", EVIDENCE, first.ticket_id)
        retried = await backend.file(session, ticket, "inc", "run-2", EVIDENCE, first.ticket_id)
        assert again.reused and again.ticket_id == retried.ticket_id == first.ticket_id == "VND-0001"
        assert list(desk.tickets) == ["VND-0001"] and len(desk.tickets["VND-0001"]["updates"]) == 1
        other = await backend.file(session, ticket, "inc", "run-3", EVIDENCE, "GPU-7")  # another backend's
        await desk._resolve(desk.tickets["VND-0001"])
        third = await backend.file(session, ticket, "inc", "run-4", EVIDENCE, "VND-0001")
    assert (other.ticket_id, other.reused) == ("VND-0002", False)
    assert (third.ticket_id, third.reused) == ("VND-0003", False)


async def test_servicenow_adds_one_work_note_to_the_episodes_open_record(served: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A work note is journaled (``sys_journal_field``), and found there by this run's marker on a retry."""
    import aiohttp

    from activities.tickets import servicenow as backend

    sn = FakeServiceNow(user="svc", password="pw")
    monkeypatch.setenv("PODMEDIC_SERVICENOW_PASSWORD", "pw")
    settings = ServiceNowTicket(url=await served(sn), user="svc")
    async with aiohttp.ClientSession() as session:
        first = await backend.file(session, settings, "run-1", EVIDENCE)
        again = await backend.file(session, settings, "run-2", EVIDENCE, first.ticket_id)
        retried = await backend.file(session, settings, "run-2", EVIDENCE, first.ticket_id)
        assert again.reused and again.ticket_id == retried.ticket_id == first.ticket_id
        assert len(sn.tickets) == 1 and len(sn.journal) == 1
        assert sn.journal[0]["element_id"] == sn.tickets[first.ticket_id or ""]["sys_id"]
        assert "The device failed again" in sn.journal[0]["value"]
        await sn.resolve(first.ticket_id or "")
        third = await backend.file(session, settings, "run-3", EVIDENCE, first.ticket_id)
    assert not third.reused and third.ticket_id != first.ticket_id and len(sn.tickets) == 2


@pytest.mark.parametrize("kind", ["webhook", "jira", "servicenow"])
async def test_a_note_reaches_the_open_ticket_once_and_never_a_resolved_one(
        served: Any, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """``note_ticket`` (a device back in service): each backend's own way of adding to a ticket (the webhook's
    ``POST <url>/<id>/updates`` with a ``note``, a Jira comment, a ServiceNow work note), once per key however
    often the activity is retried, and ``False`` for a resolved ticket, which gets nothing."""
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "tok")
    monkeypatch.setenv("PODMEDIC_SERVICENOW_PASSWORD", "pw")
    fake: Any
    if kind == "jira":
        fake = FakeJira(token="tok")
        ticket = Ticket(backend="jira", jira=JiraTicket(url=await served(fake), project="OPS", email="bot@example.com"))
    elif kind == "servicenow":
        fake = FakeServiceNow(user="svc", password="pw")
        ticket = Ticket(backend="servicenow", servicenow=ServiceNowTicket(url=await served(fake), user="svc"))
    else:
        fake = VendorDesk()
        ticket = Ticket(url=f"{await served(fake)}/tickets")

    def notes() -> list[str]:
        if kind == "jira":
            return [json.dumps(c["body"]) for c in fake.comments.get(filed, [])]
        if kind == "servicenow":
            return [j["value"] for j in fake.journal]
        return [u["note"] for u in fake.tickets[filed].get("updates", [])]

    async def note(key: str) -> bool:
        inp = TicketNoteInput(incident_id=EVIDENCE["incident"], idempotency_key=key, url=ticket.url, ticket_id=filed,
                              text="podmedic: back in service", ticket=ticket)
        return bool(await ActivityEnvironment().run(TicketActivities().note_ticket, inp))

    filed = str((await _file(ticket)).ticket_id)
    assert await note("run-1#ticket-note#0") and await note("run-1#ticket-note#0")  # a retried activity
    assert len(notes()) == 1 and "podmedic: back in service" in notes()[0], notes()
    if kind == "webhook":
        await fake._resolve(fake.tickets[filed])
    else:
        await fake.resolve(filed)
    assert not await note("run-2#ticket-note#0") and len(notes()) == 1, notes()
