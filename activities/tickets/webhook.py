"""Generic webhook backend: a signed JSON POST per fault episode, an update per later incident,
a GET for the status.

``POST <url>`` carries the evidence bundle, an ``Idempotency-Key`` header that is the same on
every retry (a worker that dies between sending and recording never files a second ticket)
and, when a secret is configured, the Standard Webhooks signature (``webhook-id``, ``webhook-timestamp``,
``webhook-signature``: https://www.standardwebhooks.com), whose timestamp lets the receiver refuse a
request replayed later; ``ticket.legacy_signature`` adds the old ``X-Podmedic-Signature: sha256=<hex
HMAC of the body>`` for receivers not yet moved.
The receiver answers ``{"id": ...}``; ``GET <url>/<id>`` answers ``{"status": ...}``.
``POST <url>/<id>/updates`` (same body and headers, its own message id) adds a later incident's evidence
to an open ticket; the receiver keeps one update per ``Idempotency-Key`` and answers 404 for an
unknown ticket and 409 for a resolved one, and podmedic then files a new ticket.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from temporalio.exceptions import ApplicationError

from activities.tickets import evidence as ev
from activities.tickets.common import (
    LEGACY_SIGNATURE_HEADER,
    TicketConfigError,
    call,
    expand,
    legacy_sign,
    read_secret,
    short_key,
    sign,
)
from podmedic.domain.steps import TicketResult
from podmedic.domain.ticket_policy import Ticket

RESOLVED = ("resolved", "closed", "done")


def _auth(ticket: Ticket) -> dict[str, str]:
    token = read_secret("ticket.token", ticket.token_file, ticket.token_env, required=False)
    return {"Authorization": f"Bearer {token}"} if token else {}


def _url(ticket: Ticket) -> str:
    url = expand(ticket.url)
    if url and not url.startswith(("http://", "https://")):
        raise TicketConfigError(f"ticket.url: {url!r} is not an http(s) URL")
    return url


def _body(incident_id: str, key: str, evidence: dict[str, Any]) -> bytes:
    return json.dumps({"idempotency_key": key, "title": ev.title(evidence), "incident": incident_id,
                       "evidence": evidence}, separators=(",", ":"), default=str).encode()


def _signed(ticket: Ticket, key: str, body: bytes, kind: str) -> dict[str, str]:
    """The headers of one post, signed now. The message id is the same on every retry of the same post
    (``kind``: ``create`` or ``update``), as the spec asks, so a receiver can drop a repeat."""
    headers = {"Content-Type": "application/json", "Idempotency-Key": key, **_auth(ticket)}
    secret = read_secret("ticket.secret", ticket.secret_file, ticket.secret_env, required=False)
    if secret:
        headers.update(sign(secret, f"msg_{short_key(key)}_{kind}", body))
        if ticket.legacy_signature:
            headers[LEGACY_SIGNATURE_HEADER] = legacy_sign(secret, body)
    return headers


async def _update(session: aiohttp.ClientSession, ticket: Ticket, url: str, ticket_id: str, key: str,
                  body: bytes) -> bool:
    """Add the evidence to the open ticket; ``False`` when the receiver has it no more or resolved it."""
    done = await call(session, "POST", f"{url.rstrip('/')}/{ticket_id}/updates", data=body,
                      headers=_signed(ticket, key, body, "update"), gone=(404, 409))
    return done is not None


async def file(session: aiohttp.ClientSession, ticket: Ticket, incident_id: str, key: str,
               evidence: dict[str, Any], prior: str | None = None) -> TicketResult:
    """Add the evidence to ``prior`` (the episode's ticket) while it is open, else file (or find
    again, by idempotency key) the incident's ticket."""
    url = _url(ticket)
    if not url:
        return TicketResult(filed=False, backend="webhook",
                            detail=f"no ticket URL configured ({ticket.url!r} is empty here)")
    body = _body(incident_id, key, evidence)
    if prior and await _is_open(session, ticket, prior) and await _update(session, ticket, url, prior, key, body):
        return TicketResult(filed=True, ticket_id=prior, backend="webhook", reused=True,
                            detail=f"device failed again while {prior} is open: evidence added to it")
    data = await call(session, "POST", url, data=body, headers=_signed(ticket, key, body, "create"))
    ticket_id = str(data.get("id") or data.get("key") or "") if isinstance(data, dict) else ""
    if not ticket_id:
        raise ApplicationError(f"POST {url}: answer has no ticket id: {data!r:.200}", type="TicketRejected",
                               non_retryable=True)
    return TicketResult(filed=True, ticket_id=ticket_id, backend="webhook")


async def note(session: aiohttp.ClientSession, ticket: Ticket, incident_id: str, key: str, ticket_id: str,
               text: str) -> bool:
    """Add ``text`` to the open ticket as an update (``note``, no evidence); ``False`` when the receiver has
    it no more or resolved it. The same key is the same update however often it is sent."""
    url = _url(ticket)
    if not url:
        return False
    body = json.dumps({"idempotency_key": key, "incident": incident_id, "note": text},
                      separators=(",", ":")).encode()
    return await _update(session, ticket, url, ticket_id, key, body)


async def _is_open(session: aiohttp.ClientSession, ticket: Ticket, ticket_id: str) -> bool:
    """Whether the receiver has ``ticket_id`` open (one it does not know, from another backend, is not)."""
    data = await call(session, "GET", f"{_url(ticket).rstrip('/')}/{ticket_id}", headers=_auth(ticket),
                      missing_ok=True)
    return isinstance(data, dict) and str(data.get("status", "")).lower() not in RESOLVED


async def status(session: aiohttp.ClientSession, ticket: Ticket, ticket_id: str) -> str:
    """``open`` or ``resolved``, as the receiver says."""
    url = _url(ticket)
    if not url or not ticket_id:
        return "open"
    data = await call(session, "GET", f"{url.rstrip('/')}/{ticket_id}", headers=_auth(ticket))
    state = str(data.get("status", "")).lower() if isinstance(data, dict) else ""
    return "resolved" if state in RESOLVED else "open"
