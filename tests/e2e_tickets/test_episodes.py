"""One ticket per fault episode, on every backend: a device that keeps failing while its ticket is
open adds each incident's evidence to that ticket; the incident that makes it a repeat offender
files a new one; once the vendor resolved the episode's ticket, the next failure files a new one.

What each backend does with a later incident's evidence is its own API's way of adding to a ticket:
the webhook desk's ``POST <url>/<id>/updates`` (podmedic's protocol, docs/recovery-tickets.md),
a Jira comment (``POST /rest/api/{2|3}/issue/{key}/comment``), a ServiceNow work note (``PATCH
/api/now/table/<table>/<sys_id>`` with ``work_notes``, journaled in ``sys_journal_field``).
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import Outcome
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk
from podmedic_sim.vendors.jira import FakeJira, _text
from podmedic_sim.vendors.servicenow import FakeServiceNow
from tests.e2e_tickets.conftest import SECRETS
from tests.e2e_tickets.helpers import outcome, policy, unused_device
from tests.helpers import assert_eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPEAT = "repeat_offenders: {incidents: 3, window_s: 3600}"


class Backend:
    """One fake ticket system as these tests read it: its tickets, what was added to each, resolving."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        if kind == "jira":
            self.fake: Any = FakeJira(project="GPU", email="bot@example.com", token=SECRETS["PODMEDIC_JIRA_TOKEN"])
        elif kind == "servicenow":
            self.fake = FakeServiceNow(user="podmedic", password=SECRETS["PODMEDIC_SERVICENOW_PASSWORD"])
        else:
            self.fake = VendorDesk(secret=SECRETS["PODMEDIC_TICKET_SECRET"])

    def settings(self, url: str) -> str:
        if self.kind == "jira":
            return f'backend: jira, jira: {{url: "{url}", project: GPU, email: bot@example.com}}'
        if self.kind == "servicenow":
            return f'backend: servicenow, servicenow: {{url: "{url}", user: podmedic}}'
        return f'url: "{url}/tickets"'

    def ids(self) -> list[str]:
        return list(self.fake.tickets)

    def additions(self, ticket: str) -> list[str]:
        """The text of everything added to ``ticket`` after it was filed."""
        if self.kind == "jira":
            return [_text(c["body"]) for c in self.fake.comments.get(ticket, [])]
        if self.kind == "servicenow":
            sys_id = self.fake.tickets[ticket]["sys_id"]
            return [j["value"] for j in self.fake.journal if j["element_id"] == sys_id]
        return [str(u["evidence"]) for u in self.fake.tickets[ticket].get("updates", [])]

    def evidence_of(self, ticket: str) -> str:
        t = self.fake.tickets[ticket]
        return str(t.get("evidence") or t.get("description") or t.get("fields", {}).get("description"))

    async def resolve(self, ticket: str) -> None:
        if self.kind == "webhook":
            await self.fake._resolve(self.fake.tickets[ticket])
        else:
            await self.fake.resolve(ticket)


async def _again(worker: Client, front: Any, device: str, runs: int, message: str) -> IncidentOutcome:
    """Back to Healthy for a while, then failing again: the next incident, once the earlier ones are
    visible (the repeat-offender count and the episode's ticket come from visibility)."""
    async def visible() -> None:
        closed = [wf async for wf in worker.list_workflows(f"WorkflowId = 'device/{device}' AND "
                                                            "ExecutionStatus = 'Completed'")]
        assert len(closed) == runs and all(wf.typed_search_attributes for wf in closed)
    await assert_eventually(visible, timeout=15)
    await front.fail(device, code=None, message="looked fine", health="Healthy")
    await front.fail(device, message=message)
    return await outcome(worker, device)


def _timeline(result: IncidentOutcome) -> str:
    return "\n".join(f"{t.step} {t.message}" for t in result.timeline)


@pytest.mark.parametrize("kind", ["webhook", "jira", "servicenow"])
async def test_one_ticket_per_fault_episode(sim: SimCluster, worker: Client, ingest: Any, fakes: Any,
                                            taken: set[str], kind: str) -> None:
    backend = Backend(kind)
    url = await fakes(backend.fake)
    # The vendor takes longer than each incident waits: each closes quarantined, its ticket open.
    front = await ingest(policy(backend.settings(url), wait_resolution_s=1.5, extra=REPEAT))
    device = await unused_device(worker, sim, taken)
    await front.fail(device)
    first = await outcome(worker, device)
    assert first.outcome is Outcome.QUARANTINED and first.ticket_id, first.explanation
    episode = first.ticket_id
    assert backend.ids() == [episode]

    second = await _again(worker, front, device, 1, "XID 79 again")
    assert second.ticket_id == episode, _timeline(second)
    assert f"ticket {episode} of this fault episode is still open" in _timeline(second)
    assert backend.ids() == [episode]
    [added] = backend.additions(episode)
    assert "XID 79 again" in added

    third = await _again(worker, front, device, 2, "XID 79 a third time")
    assert "repeat offender: 3 incidents" in _timeline(third)
    lemon = third.ticket_id
    assert lemon and lemon != episode and backend.ids() == [episode, lemon], _timeline(third)
    assert "repeat offender" in backend.evidence_of(lemon) and episode in backend.evidence_of(lemon)
    assert len(backend.additions(episode)) == 1 and backend.additions(lemon) == []

    await backend.resolve(lemon)  # the vendor closes the lemon's ticket: its episode is over
    fourth = await _again(worker, front, device, 3, "XID 79 after the repair")
    assert fourth.ticket_id not in (None, episode, lemon), _timeline(fourth)
    assert backend.ids() == [episode, lemon, fourth.ticket_id]
    assert backend.additions(lemon) == []
