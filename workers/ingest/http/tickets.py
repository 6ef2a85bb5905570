"""Vendor resolution callbacks: ``POST /v1/tickets/{id}/resolved``.

A vendor's system (or a Jira/ServiceNow automation) calls this when a ticket podmedic filed
is resolved. Same bearer token as ``/v1/events``. The body is optional JSON
``{"by": "...", "note": "..."}``. The incident is found by its ``PodmedicTicket`` search
attribute and told through the ``resolve`` signal, which Temporal keeps even while no
worker runs; the incident then verifies the device and untaints.

Answers: 202 once every open incident with that ticket got the signal, 404 when none is
open, 400 for a bad id or body, 401 without the token, 503 when Temporal is unreachable.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from aiohttp import web
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain import search
from podmedic.domain import workflow_names as names
from podmedic.domain.incident import Resolution

if TYPE_CHECKING:
    from workers.ingest.http.app import IngestFront

log = logging.getLogger("podmedic.ingest.tickets")

# Jira keys (OPS-12), ServiceNow numbers (INC0010001), webhook ids: never a quote, so the id
# can go into a visibility query as is.
TICKET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_BODY = 16 * 1024


class TicketCallbacks:
    """The route's handler, bound to the ingest front (its auth, client and refusals)."""

    def __init__(self, front: IngestFront) -> None:
        self.front = front
        self.client = front.deliverer.client

    async def resolved(self, request: web.Request) -> web.Response:
        """``POST /v1/tickets/{id}/resolved``."""
        from workers.ingest.http.app import Refusal

        try:
            self.front._authorize(request)
            ticket = request.match_info["id"]
            if not TICKET_ID.match(ticket):
                raise Refusal(400, {"error": "bad ticket id", "what": "id: letters, digits and ._:- only, "
                                    "at most 128 characters"}, f"bad ticket id {ticket[:100]!r}")
            resolution = self._resolution(ticket, await request.read())
            incidents = await self._deliver(ticket, resolution)
        except Refusal as refusal:
            return self.front._refuse(request, refusal)
        if not incidents:
            return web.json_response({"error": "no open incident has this ticket", "ticket": ticket}, status=404)
        log.info("ticket %s resolved by %s: told %s", ticket, resolution.by, ", ".join(incidents))
        return web.json_response({"ticket": ticket, "incidents": incidents, "by": resolution.by}, status=202)

    def _resolution(self, ticket: str, body: bytes) -> Resolution:
        from workers.ingest.http.app import Refusal

        if len(body) > MAX_BODY:
            raise Refusal(413, {"error": "request body too large", "limit_bytes": MAX_BODY}, "body too large")
        payload: Any = {}
        if body.strip():
            try:
                payload = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise Refusal(400, {"error": "body is not JSON", "what": str(exc)}, f"invalid JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise Refusal(400, {"error": "body must be a JSON object", "what": "(body)"}, "body not an object")
        for field in ("by", "note"):
            if field in payload and not isinstance(payload[field], str):
                raise Refusal(400, {"error": f"{field} must be a string", "what": field}, f"{field} not a string")
        unknown = sorted(set(payload) - {"by", "note"})
        if unknown:
            raise Refusal(400, {"error": "unknown field(s)", "what": unknown}, f"unknown fields {unknown}")
        by = str(payload.get("by") or "").strip() or f"vendor (ticket {ticket})"
        return Resolution(by=by[:200], note=str(payload.get("note") or "")[:2000])

    async def _deliver(self, ticket: str, resolution: Resolution) -> list[str]:
        from workers.ingest.http.app import Refusal

        query = (f"WorkflowType = '{names.DEVICE_INCIDENT}' AND ExecutionStatus = 'Running' "
                 f"AND {search.TICKET.name} = '{ticket}'")
        told: list[str] = []
        try:
            async for wf in self.client.list_workflows(query, limit=50):
                handle = self.client.get_workflow_handle(wf.id, run_id=wf.run_id)
                try:
                    await handle.signal(names.RESOLVE, resolution)
                except RPCError as err:
                    if err.status != RPCStatusCode.NOT_FOUND:  # closed since the query: not open any more
                        raise
                    continue
                told.append(wf.id)
        except RPCError as exc:
            raise Refusal(503, {"error": "Temporal unavailable; retry later", "what": str(exc)[:500]},
                          f"Temporal: {exc}", {"Retry-After": "5"}) from None
        return told


def register(app: web.Application, front: IngestFront) -> None:
    """Add the route to the ingest's application."""
    app.router.add_post("/v1/tickets/{id}/resolved", TicketCallbacks(front).resolved)
