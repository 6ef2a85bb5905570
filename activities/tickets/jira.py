"""Jira REST backend (v2 or v3 shape): an issue per incident, a comment when the device fails again.

Jira has no idempotency header, so every issue carries a label derived from the incident
run's idempotency key (``podmedic-<hash>``) and filing searches for it first: a worker
killed between Jira creating the issue and Temporal recording the result finds the issue
on its retry instead of filing another. A comment is made idempotent the same way, by a
marker in its text.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

import aiohttp
from temporalio.exceptions import ApplicationError

from activities.tickets import evidence as ev
from activities.tickets.common import TicketConfigError, base_url, call, expand, read_secret, short_key
from podmedic.domain.steps import TicketResult
from podmedic.domain.ticket_policy import JiraTicket


def label_for(key: str) -> str:
    """The label that finds this incident run's issue again."""
    return f"podmedic-{short_key(key)}"


class JiraClient:
    """The few Jira REST calls podmedic makes, with the configured auth and API version."""

    def __init__(self, session: aiohttp.ClientSession, settings: JiraTicket) -> None:
        self.session = session
        self.settings = settings
        base = base_url("ticket.jira.url", settings.url)
        self.api = f"{base}/rest/api/{settings.api_version}"
        token = read_secret("ticket.jira.token", settings.token_file, settings.token_env, required=True)
        if settings.auth == "bearer":
            self.headers = {"Authorization": f"Bearer {token}"}
        else:
            email = expand(settings.email or "")
            if not email:
                raise TicketConfigError("ticket.jira.email: empty on this worker (after ${VAR} expansion)")
            pair = base64.b64encode(f"{email}:{token}".encode()).decode()
            self.headers = {"Authorization": f"Basic {pair}"}
        self.headers["Accept"] = "application/json"

    def _doc(self, text: str) -> Any:
        """A description or comment body: plain text for v2, Atlassian Document Format for v3."""
        if self.settings.api_version == "2":
            return text
        return {"type": "doc", "version": 1,
                "content": [{"type": "codeBlock", "content": [{"type": "text", "text": text}]}]}

    async def find(self, label: str) -> str | None:
        """The key of the issue carrying ``label``, if one exists.

        Jira Cloud searches through ``GET /rest/api/{2|3}/search/jql`` (the "enhanced search" of
        Atlassian's changelog CHANGE-2046; the old ``/search`` answers 410 Gone since 2025); Jira
        Data Center keeps ``GET /rest/api/2/search``. One page of one issue is enough: the oldest
        issue with the label is this run's.
        """
        jql = quote(f'labels = "{label}" ORDER BY created ASC')
        path = "search/jql" if self.settings.deployment == "cloud" else "search"
        data = await call(self.session, "GET", f"{self.api}/{path}?jql={jql}&fields=status&maxResults=1",
                          headers=self.headers)
        issues = data.get("issues") or [] if isinstance(data, dict) else []
        return str(issues[0]["key"]) if issues else None

    async def create(self, label: str, summary: str, description: str) -> str:
        """Create the issue; returns its key."""
        s = self.settings
        fields = {"project": {"key": s.project}, "summary": summary[:250], "description": self._doc(description),
                  "issuetype": {"name": s.issue_type}, "labels": [*s.labels, label]}
        data = await call(self.session, "POST", f"{self.api}/issue", json={"fields": fields}, headers=self.headers)
        key = data.get("key") if isinstance(data, dict) else None
        if not key:
            raise ApplicationError(f"POST {self.api}/issue: answer has no key: {data!r:.200}", type="TicketRejected",
                                   non_retryable=True)
        return str(key)

    async def is_done(self, key: str) -> bool | None:
        """Whether the issue's status is in the ``done`` category; ``None`` when there is no such issue."""
        data = await call(self.session, "GET", f"{self.api}/issue/{quote(key)}?fields=status", headers=self.headers,
                          missing_ok=True)
        if data is None:
            return None
        status = ((data.get("fields") or {}).get("status") or {}) if isinstance(data, dict) else {}
        return str((status.get("statusCategory") or {}).get("key", "")).lower() == "done"

    async def comment_once(self, key: str, marker: str, text: str) -> None:
        """Comment on the issue unless a comment with ``marker`` is already there."""
        url = f"{self.api}/issue/{quote(key)}/comment"
        data = await call(self.session, "GET", f"{url}?maxResults=1000", headers=self.headers)
        for comment in (data.get("comments") or []) if isinstance(data, dict) else []:
            if marker in str(comment.get("body", "")):
                return
        await call(self.session, "POST", url, json={"body": self._doc(f"{text}\n\n[{marker}]")}, headers=self.headers)


async def file(session: aiohttp.ClientSession, settings: JiraTicket, key: str, evidence: dict[str, Any],
               previous_ticket: str | None) -> TicketResult:
    """Find this run's issue, or comment on the device's open one, or create one."""
    jira = JiraClient(session, settings)
    label = label_for(key)
    found = await jira.find(label)
    if found:
        return TicketResult(filed=True, ticket_id=found, backend="jira", detail=f"issue {found} found by label")
    # A previous ticket from another backend (or deleted) is no Jira issue: is_done says None.
    if previous_ticket and settings.comment_on_recurrence and await jira.is_done(previous_ticket) is False:
        await jira.comment_once(previous_ticket, label, f"The device failed again.\n\n{ev.text(evidence)}")
        return TicketResult(filed=True, ticket_id=previous_ticket, backend="jira", reused=True,
                            detail=f"device failed again while {previous_ticket} is open: commented")
    created = await jira.create(label, ev.title(evidence), ev.text(evidence))
    return TicketResult(filed=True, ticket_id=created, backend="jira")


async def note(session: aiohttp.ClientSession, settings: JiraTicket, key: str, ticket_id: str, text: str) -> bool:
    """Comment ``text`` on the issue while it is open (once per ``key``); ``False`` when it is done or gone."""
    jira = JiraClient(session, settings)
    if await jira.is_done(ticket_id) is not False:
        return False
    await jira.comment_once(ticket_id, label_for(key), text)
    return True


async def status(session: aiohttp.ClientSession, settings: JiraTicket, ticket_id: str) -> str:
    """``resolved`` when the issue's status category is done, else ``open``."""
    if not ticket_id:
        return "open"
    # A deleted issue never resolves by polling: the incident waits for a callback or its deadline.
    return "resolved" if await JiraClient(session, settings).is_done(ticket_id) else "open"
