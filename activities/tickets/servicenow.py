"""ServiceNow Table API backend: a record per fault episode, found again by its ``correlation_id``.

Filing first queries ``GET /api/now/table/<table>?sysparm_query=correlation_id=<key>``: a
worker killed between ServiceNow creating the record and Temporal recording the result
finds the record on its retry. The ticket id is the record's ``number`` (``INC0010001``),
the name people use; ``state`` 6 (Resolved) or 7 (Closed) means resolved.

A device failing again while its record is open gets a work note instead of a new record:
``PATCH /api/now/table/<table>/<sys_id>`` with ``work_notes`` (a journal field: each write
adds an entry, kept in ``sys_journal_field``). The note ends with this run's correlation
marker, and ``sys_journal_field`` is searched for it first, so a retry adds no second note.
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
from podmedic.domain.ticket_policy import ServiceNowTicket


def correlation_for(key: str) -> str:
    """The correlation id of this incident run's record (the field holds 100 characters)."""
    return f"podmedic-{short_key(key, 32)}"


class ServiceNowClient:
    """Table API calls with basic auth."""

    def __init__(self, session: aiohttp.ClientSession, settings: ServiceNowTicket) -> None:
        self.session = session
        self.settings = settings
        base = base_url("ticket.servicenow.url", settings.url)
        self.table = f"{base}/api/now/table/{settings.table}"
        user = expand(settings.user)
        if not user:
            raise TicketConfigError("ticket.servicenow.user: empty on this worker (after ${VAR} expansion)")
        password = read_secret("ticket.servicenow.password", settings.password_file, settings.password_env,
                               required=True)
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.headers = {"Authorization": f"Basic {pair}", "Accept": "application/json"}

    async def query(self, field: str, value: str) -> dict[str, Any] | None:
        """The first record whose ``field`` equals ``value``."""
        q = quote(f"{field}={value}")
        data = await call(self.session, "GET",
                          f"{self.table}?sysparm_query={q}&sysparm_limit=1&sysparm_fields=sys_id,number,state",
                          headers=self.headers)
        rows = (data.get("result") or []) if isinstance(data, dict) else []
        return rows[0] if rows else None

    async def note_once(self, sys_id: str, marker: str, text: str) -> None:
        """Add a work note to the record unless one carrying ``marker`` is already there."""
        journal = self.table.rsplit("/", 1)[0] + "/sys_journal_field"
        q = quote(f"element_id={sys_id}^element=work_notes^valueLIKE{marker}")
        data = await call(self.session, "GET", f"{journal}?sysparm_query={q}&sysparm_limit=1&sysparm_fields=sys_id",
                          headers=self.headers)
        if (data.get("result") if isinstance(data, dict) else None):
            return
        await call(self.session, "PATCH", f"{self.table}/{sys_id}", json={"work_notes": f"{text}\n\n[{marker}]"},
                   headers=self.headers)

    async def create(self, record: dict[str, Any]) -> dict[str, Any]:
        """Insert a record; returns it as ServiceNow answers."""
        data = await call(self.session, "POST", self.table, json=record, headers=self.headers)
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, dict) or not result.get("number"):
            raise ApplicationError(f"POST {self.table}: answer has no record number: {data!r:.200}",
                                   type="TicketRejected", non_retryable=True)
        return result


async def file(session: aiohttp.ClientSession, settings: ServiceNowTicket, key: str,
               evidence: dict[str, Any], prior: str | None = None) -> TicketResult:
    """Find this run's record by correlation id, or add a work note to ``prior`` (the episode's
    record) while it is open, or create a record."""
    sn = ServiceNowClient(session, settings)
    correlation = correlation_for(key)
    found = await sn.query("correlation_id", correlation)
    if found:
        return TicketResult(filed=True, ticket_id=str(found["number"]), backend="servicenow",
                            detail="record found by correlation_id")
    record_of_prior = await sn.query("number", prior) if prior else None
    if record_of_prior and str(record_of_prior.get("state", "")) not in settings.resolved_states:
        text = f"The device failed again.\n\n{ev.text(evidence)}"
        await sn.note_once(str(record_of_prior["sys_id"]), correlation, text)
        return TicketResult(filed=True, ticket_id=str(prior), backend="servicenow", reused=True,
                            detail=f"device failed again while {prior} is open: work note added")
    record = {"short_description": ev.title(evidence)[:160], "description": ev.text(evidence),
              "correlation_id": correlation, "correlation_display": "podmedic", "category": settings.category,
              "impact": "2", "urgency": "2"}
    if settings.assignment_group:
        record["assignment_group"] = settings.assignment_group
    created = await sn.create(record)
    return TicketResult(filed=True, ticket_id=str(created["number"]), backend="servicenow")


async def note(session: aiohttp.ClientSession, settings: ServiceNowTicket, key: str, ticket_id: str,
               text: str) -> bool:
    """A work note on the record while it is open (once per ``key``); ``False`` when it is resolved or gone."""
    sn = ServiceNowClient(session, settings)
    found = await sn.query("number", ticket_id)
    if not found or str(found.get("state", "")) in settings.resolved_states:
        return False
    await sn.note_once(str(found["sys_id"]), correlation_for(key), text)
    return True


async def status(session: aiohttp.ClientSession, settings: ServiceNowTicket, ticket_id: str) -> str:
    """``resolved`` when the record's ``state`` is one of the policy's resolved states."""
    if not ticket_id:
        return "open"
    found = await ServiceNowClient(session, settings).query("number", ticket_id)
    if found is None:
        return "open"
    return "resolved" if str(found.get("state", "")) in settings.resolved_states else "open"
