"""Jira's search as each deployment serves it, and podmedic's search-before-create against it.

Shapes from Atlassian's references, not from podmedic: Jira Cloud removed ``GET|POST
/rest/api/{2|3}/search`` (changelog CHANGE-2046, announced 2024-10-31, shut down from August
2025) and answers it with 410 Gone and ``{"errorMessages": ["The requested API has been removed.
Please migrate to the /rest/api/3/search/jql API. ..."], "errors": {}}``; its replacement ``GET
/rest/api/{2|3}/search/jql`` pages with ``nextPageToken``/``isLast``, has no ``total`` and
returns only the ``fields`` asked for. Jira Data Center keeps ``GET /rest/api/2/search``
(``startAt``, ``maxResults``, ``total``) and has no REST API 3.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from pydantic import ValidationError

from activities.tickets import jira as backend
from podmedic.domain.ticket_policy import JiraTicket
from podmedic_sim.vendors.base import basic
from podmedic_sim.vendors.jira import SEARCH_REMOVED, FakeJira
from tests.unit.test_ticket_backends import EVIDENCE, served  # noqa: F401  (the fixture)

JQL = 'labels = "podmedic-x" ORDER BY created ASC'


async def _get(url: str, **params: str) -> tuple[int, Any]:
    headers = {"Authorization": basic("bot@example.com", "tok")}
    async with aiohttp.ClientSession(headers=headers) as session, session.get(url, params=params) as answer:
        return answer.status, await answer.json()


@pytest.mark.asyncio(loop_scope="session")
async def test_jira_cloud_answers_the_removed_search_with_410(served: Any) -> None:  # noqa: F811
    url = await served(FakeJira(token="tok"))
    for version in ("2", "3"):
        status, body = await _get(f"{url}/rest/api/{version}/search", jql=JQL)
        assert status == 410 and body == {"errorMessages": [SEARCH_REMOVED], "errors": {}}


@pytest.mark.asyncio(loop_scope="session")
async def test_jira_cloud_search_jql_pages_by_token_and_returns_the_fields_asked(
        served: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    fake = FakeJira(token="tok")
    url = await served(fake)
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "tok")
    settings = JiraTicket(url=url, project="OPS", email="bot@example.com", api_version="3")
    async with aiohttp.ClientSession() as session:
        jira = backend.JiraClient(session, settings)
        for summary in ("one", "two", "three"):
            await jira.create("podmedic-x", summary, "text")
        assert await jira.find("podmedic-x") == "OPS-1"  # the oldest issue with the label
    status, first = await _get(f"{url}/rest/api/3/search/jql", jql=JQL, maxResults="2")
    assert status == 200 and first["isLast"] is False and "total" not in first
    assert [set(i) for i in first["issues"]] == [{"id", "key", "self"}] * 2  # no fields unless asked
    status, last = await _get(f"{url}/rest/api/3/search/jql", jql=JQL, maxResults="2", fields="status",
                              nextPageToken=first["nextPageToken"])
    assert last["isLast"] is True and "nextPageToken" not in last
    assert [i["key"] for i in last["issues"]] == ["OPS-3"] and set(last["issues"][0]["fields"]) == {"status"}
    status, _ = await _get(f"{url}/rest/api/3/search/jql", jql="")
    assert status == 400  # Cloud refuses an unbounded query
    assert fake.creates_received == 3


@pytest.mark.asyncio(loop_scope="session")
async def test_jira_data_center_keeps_the_classic_search(served: Any,  # noqa: F811
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeJira(token="tok", cloud=False)
    url = await served(fake)
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "tok")
    settings = JiraTicket(url=url, project="OPS", email="bot@example.com", deployment="datacenter")
    async with aiohttp.ClientSession() as session:
        first = await backend.file(session, settings, "run-1", EVIDENCE, None)
        again = await backend.file(session, settings, "run-1", EVIDENCE, None)
    assert first.ticket_id == again.ticket_id == "OPS-1" and fake.creates_received == 1 and fake.rejected == []
    status, body = await _get(f"{url}/rest/api/2/search", jql=JQL.replace("podmedic-x", "nothing"))
    assert status == 200 and body["total"] == 0 and body["startAt"] == 0
    status, _ = await _get(f"{url}/rest/api/2/search/jql", jql=JQL)
    assert status == 404


def test_data_center_has_no_rest_api_3() -> None:
    with pytest.raises(ValidationError, match="Jira Data Center serves REST API 2"):
        JiraTicket(url="https://jira.example", project="OPS", email="a@b", deployment="datacenter",
                   api_version="3")
