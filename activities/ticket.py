"""Ticket stage: vendor tickets through a generic webhook backend.

The backend receives ``POST <url>`` with the JSON evidence bundle and an
``Idempotency-Key`` header that is the same on every retry, so a worker that dies between
sending and recording never files a second ticket; it answers ``{"id": ...}``.
``GET <url>/<id>`` answers ``{"status": "open"|"resolved"}``. The URL may name environment
variables (``${PODMEDIC_TICKET_URL}``), expanded here so endpoints and credentials stay out
of workflow history.
"""

from __future__ import annotations

import os
import string
from typing import Any

import aiohttp
from temporalio import activity
from temporalio.exceptions import ApplicationError

from podmedic.steps import TicketInput, TicketResult, TicketStatusInput

TIMEOUT = aiohttp.ClientTimeout(total=15)


def expand_url(template: str) -> str:
    """``${VAR}`` from the worker's environment; unset variables make the URL empty."""
    try:
        return string.Template(template).substitute(os.environ).strip()
    except (KeyError, ValueError):
        return ""


def _headers() -> dict[str, str]:
    token = os.environ.get("PODMEDIC_TICKET_TOKEN", "")
    return {"Authorization": f"Bearer {token}"} if token else {}


async def _check(resp: aiohttp.ClientResponse, what: str) -> Any:
    if resp.status in (408, 429) or resp.status >= 500:
        raise ApplicationError(f"{what}: HTTP {resp.status}, will retry", type="TicketBackendUnavailable")
    if resp.status >= 400:
        text = (await resp.text())[:300]
        raise ApplicationError(f"{what}: HTTP {resp.status} {text}", type="TicketRejected", non_retryable=True)
    return await resp.json(content_type=None)


class TicketActivities:
    """Generic webhook ticket backend."""

    @activity.defn(name="file_ticket")
    async def file_ticket(self, inp: TicketInput) -> TicketResult:
        """File one ticket per incident run (the idempotency key makes retries safe)."""
        url = expand_url(inp.url)
        if not url:
            return TicketResult(filed=False, detail=f"no ticket URL configured ({inp.url!r} is empty here)")
        body = {
            "idempotency_key": inp.idempotency_key,
            "title": f"podmedic: {inp.evidence.get('device', {})} {inp.evidence.get('failure_mode', '')}",
            "incident": inp.incident_id,
            "evidence": inp.evidence,
        }
        headers = {"Idempotency-Key": inp.idempotency_key, **_headers()}
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            try:
                async with session.post(url, json=body, headers=headers) as resp:
                    data = await _check(resp, f"POST {url}")
            except aiohttp.ClientError as exc:
                raise ApplicationError(f"POST {url}: {exc}", type="TicketBackendUnavailable") from exc
        ticket_id = str(data.get("id") or data.get("key") or "")
        if not ticket_id:
            raise ApplicationError(f"POST {url}: answer has no ticket id: {data!r:.200}", type="TicketRejected",
                                   non_retryable=True)
        return TicketResult(filed=True, ticket_id=ticket_id)

    @activity.defn(name="ticket_status")
    async def ticket_status(self, inp: TicketStatusInput) -> str:
        """``open`` or ``resolved``, as the backend says."""
        url = expand_url(inp.url)
        if not url or not inp.ticket_id:
            return "open"
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            try:
                async with session.get(f"{url.rstrip('/')}/{inp.ticket_id}", headers=_headers()) as resp:
                    data = await _check(resp, f"GET {url}/{inp.ticket_id}")
            except aiohttp.ClientError as exc:
                raise ApplicationError(f"GET {url}: {exc}", type="TicketBackendUnavailable") from exc
        return "resolved" if str(data.get("status", "")).lower() in ("resolved", "closed", "done") else "open"
