"""A backend's rate limit: the next attempt waits what the backend asked for, and nothing is lost.

The 429 answers are the vendors' documented ones: Jira Cloud sends ``Retry-After`` (seconds),
``X-RateLimit-Reset`` and ``RateLimit-Reason`` (developer.atlassian.com/cloud/jira/platform/
rate-limiting); ServiceNow sends ``Retry-After``, ``X-RateLimit-Limit``, ``X-RateLimit-Reset``
and ``X-RateLimit-Rule`` with an error body ("Inbound REST API rate limiting", ServiceNow API
reference). ``Retry-After`` itself is RFC 9110 section 10.2.3: delta-seconds or an HTTP date.
"""

from __future__ import annotations

import datetime as dt
import email.utils
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from podmedic.domain.ticket_policy import JiraTicket, ServiceNowTicket, Ticket
from podmedic_sim.vendors.base import FakeDesk
from podmedic_sim.vendors.jira import FakeJira
from podmedic_sim.vendors.servicenow import FakeServiceNow
from tests.unit.test_ticket_backends import _file, served  # noqa: F401  (the fixture)


def _tickets(fake: FakeDesk, url: str) -> Ticket:
    if isinstance(fake, FakeJira):
        return Ticket(backend="jira", jira=JiraTicket(url=url, project="OPS", email="bot@example.com"))
    return Ticket(backend="servicenow", servicenow=ServiceNowTicket(url=url, user="svc", password_env="SN_PASSWORD"))


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("make", [lambda: FakeJira(token="tok"),
                                  lambda: FakeServiceNow(user="svc", password="pw")], ids=["jira", "servicenow"])
async def test_a_rate_limited_attempt_retries_after_the_wait_the_backend_asked_for(
        served: Any, monkeypatch: pytest.MonkeyPatch, make: Any) -> None:  # noqa: F811
    fake = make()
    url = await served(fake)
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "tok")
    monkeypatch.setenv("SN_PASSWORD", "pw")
    ticket = _tickets(fake, url)
    fake.throttle(1, retry_after_s=42)
    with pytest.raises(ApplicationError) as err:
        await _file(ticket)
    assert err.value.type == "TicketBackendUnavailable" and not err.value.non_retryable
    assert err.value.next_retry_delay == dt.timedelta(seconds=42)
    assert fake.tickets == {}  # the throttled search came before any create
    filed = await _file(ticket)  # the retry: filed once
    assert filed.filed and len(fake.tickets) == 1 and fake.creates_received == 1


@pytest.mark.asyncio(loop_scope="session")
async def test_retry_after_as_an_http_date_and_a_wait_too_long_are_bounded(served: Any,  # noqa: F811
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from activities.tickets.common import MAX_RETRY_AFTER_S

    class DatedJira(FakeJira):
        when = dt.datetime.now(dt.UTC) + dt.timedelta(hours=5)

        def rate_limited(self) -> Any:
            from aiohttp import web

            return web.Response(status=429, headers={"Retry-After": email.utils.format_datetime(self.when, True)})

    fake = DatedJira(token="tok")
    url = await served(fake)
    monkeypatch.setenv("PODMEDIC_JIRA_TOKEN", "tok")
    fake.throttle(1)
    with pytest.raises(ApplicationError) as err:
        await _file(_tickets(fake, url))
    assert err.value.next_retry_delay == dt.timedelta(seconds=MAX_RETRY_AFTER_S)
