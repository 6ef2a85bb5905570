"""A device that fails again while its Jira issue is still open gets a comment, not a second issue;
the second incident's evidence lists the first incident."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from podmedic.domain.models import Outcome
from podmedic_sim import SimCluster
from podmedic_sim.vendors.jira import FakeJira, _text
from tests.e2e_tickets.conftest import SECRETS
from tests.e2e_tickets.helpers import free_device, outcome, policy
from tests.helpers import assert_eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_jira_comment_on_recurrence(sim: SimCluster, worker: Client, ingest: Any, fakes: Any,
                                          taken: set[str]) -> None:
    jira = FakeJira(project="GPU", email="bot@example.com", token=SECRETS["PODMEDIC_JIRA_TOKEN"])
    url = await fakes(jira)
    # The vendor takes longer than the incident waits: it closes quarantined with the issue open.
    front = await ingest(policy(f'backend: jira, jira: {{url: "{url}", project: GPU, email: bot@example.com}}',
                                wait_resolution_s=1.5))
    device = free_device(sim, taken)
    await front.fail(device)
    first = await outcome(worker, device)
    assert first.outcome is Outcome.QUARANTINED and first.ticket_id == "GPU-1", first.explanation
    first_run = (await worker.get_workflow_handle(f"device/{device}").describe()).run_id

    async def visible() -> None:  # the next incident finds the issue through visibility
        query = f"WorkflowId = 'device/{device}' AND PodmedicTicket = 'GPU-1'"
        assert [wf async for wf in worker.list_workflows(query)]
    await assert_eventually(visible, timeout=10)

    # Back for a while (the ingest forgets the old state), then the same fault again.
    await front.fail(device, code=None, message="looked fine", health="Healthy")
    await front.fail(device, message="XID 79 again")
    second = await outcome(worker, device)
    assert second.ticket_id == "GPU-1" and second.outcome is Outcome.QUARANTINED
    assert any("ticket GPU-1 of this fault episode is still open" in t.message for t in second.timeline), "\n".join(
        f"{t.at} {t.step} {t.message}" for t in second.timeline)
    assert list(jira.tickets) == ["GPU-1"] and jira.creates_received == 1
    comments = jira.comments["GPU-1"]
    assert len(comments) == 1
    text = _text(comments[0]["body"])
    assert "The device failed again" in text and "XID 79 again" in text
    assert f"run={first_run}" in text  # the previous incident, from Temporal visibility
