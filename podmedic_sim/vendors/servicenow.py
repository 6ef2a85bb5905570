"""A fake ServiceNow Table API, strict about basic auth and the record's fields.

Routes: ``POST /api/now/table/{table}`` (answers ``{"result": {...}}`` with ``sys_id`` and a
``number`` like INC0010001), ``GET /api/now/table/{table}?sysparm_query=...``, and
``PATCH /api/now/table/{table}/{sys_id}``. Records start in state 1 (New); resolving sets state
6 (Resolved). As in ServiceNow (Table API reference; journal fields), writing ``work_notes``
adds an entry to ``sys_journal_field`` (``element_id`` the record's sys_id, ``element``
``work_notes``, ``value`` the text) rather than a field of the record, and that table is read
through the same Table API. Encoded queries: ``field=value`` and ``fieldLIKEtext`` terms
joined by ``^`` (AND).
"""

from __future__ import annotations

import functools
import operator
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

from podmedic_sim.vendors.base import FakeDesk, basic, device_in

RESOLVED = "6"
JOURNAL = "sys_journal_field"


class FakeServiceNow(FakeDesk):
    """Records of the tables podmedic writes to."""

    def __init__(self, *, user: str = "podmedic", password: str = "sn-password", table: str = "incident",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.auth = basic(user, password)
        self.table = table
        self.journal: list[dict[str, Any]] = []

    def _check(self, request: web.Request, what: str) -> web.Response | None:
        if request.headers.get("Authorization") != self.auth:
            return self.refuse(401, f"{what}: bad or missing Authorization",
                               {"error": {"message": "User Not Authenticated"}, "status": "failure"})
        if request.match_info["table"] not in (self.table, JOURNAL):
            return self.refuse(400, f"{what}: unknown table", {"error": {"message": "Invalid table"}})
        return None

    async def create(self, request: web.Request) -> web.Response:
        """``POST /api/now/table/{table}``."""
        self.creates_received += 1
        refused = self._check(request, "create")
        if refused:
            return refused
        record = await request.json()
        missing = [f for f in ("short_description", "description", "correlation_id") if not record.get(f)]
        if missing or len(str(record.get("correlation_id", ""))) > 100:
            return self.refuse(400, f"create: missing {missing} or correlation_id over 100 characters",
                               {"error": {"message": f"missing or invalid: {missing or ['correlation_id']}"}})
        number = f"INC{10001 + len(self.tickets):07d}"
        self.tickets[number] = {**record, "sys_id": uuid.uuid4().hex, "number": number, "state": "1",
                                "created": time.time(), "device": device_in(str(record["short_description"]))}
        await self.held()
        return web.json_response({"result": {k: v for k, v in self.tickets[number].items()
                                             if k not in ("created", "device")}}, status=201)

    async def query(self, request: web.Request) -> web.Response:
        """``GET /api/now/table/{table}?sysparm_query=field=value^fieldLIKEtext``."""
        refused = self._check(request, "query")
        if refused:
            return refused
        terms = _terms(request.query.get("sysparm_query", ""))
        if terms is None:
            return self.refuse(400, "query: sysparm_query must be field=value or fieldLIKEtext terms joined by ^")
        journal = request.match_info["table"] == JOURNAL
        rows = self.journal if journal else list(self.tickets.values())
        fields = ("sys_id", "element_id", "element", "value") if journal else ("sys_id", "number", "state")
        found = [{k: r.get(k) for k in fields} for r in rows if all(match(str(r.get(f, ""))) for f, match in terms)]
        return web.json_response({"result": found[: int(request.query.get("sysparm_limit", "100"))]})

    async def update(self, request: web.Request) -> web.Response:
        """``PATCH /api/now/table/{table}/{sys_id}``: fields set; ``work_notes`` journaled."""
        refused = self._check(request, "update")
        if refused:
            return refused
        record = next((t for t in self.tickets.values() if t["sys_id"] == request.match_info["sys_id"]), None)
        if record is None:
            return self.refuse(404, "update: no such record", {"error": {"message": "No Record found"}})
        changes = await request.json()
        note = changes.pop("work_notes", None)
        if note:
            self.journal.append({"sys_id": uuid.uuid4().hex, "element_id": record["sys_id"], "element": "work_notes",
                                 "name": self.table, "value": str(note)})
        record.update(changes)
        return web.json_response({"result": {k: v for k, v in record.items() if k not in ("created", "device")}})

    async def resolve(self, ticket_id: str) -> None:
        """Set state 6 (Resolved)."""
        self.tickets[ticket_id]["state"] = RESOLVED

    def rate_limited(self) -> web.Response:
        """ServiceNow's 429 ("Inbound REST API rate limiting" in its API reference): the rule's
        ``X-RateLimit-Limit`` (per hour), ``X-RateLimit-Reset`` (UNIX time), ``X-RateLimit-Rule``,
        ``Retry-After`` in seconds, and an error in the Table API's error envelope."""
        return web.json_response(
            {"error": {"message": "Rate limit exceeded", "detail": "Too many requests for this rule; retry later"},
             "status": "failure"},
            status=429,
            headers={"X-RateLimit-Limit": "100", "X-RateLimit-Reset": str(int(time.time()) + self.retry_after_s),
                     "X-RateLimit-Rule": "0f4d8d8a1b2c3d4e5f60718293a4b5c6", "Retry-After": str(self.retry_after_s)})

    def open_ids(self) -> list[str]:
        """Records not resolved or closed."""
        return [n for n, t in self.tickets.items() if t["state"] not in ("6", "7")]

    def routes(self) -> list[web.RouteDef]:
        """The Table API routes."""
        return [web.post("/api/now/table/{table}", self.create), web.get("/api/now/table/{table}", self.query),
                web.patch("/api/now/table/{table}/{sys_id}", self.update)]


def _contains(text: str, value: str) -> bool:
    return text in value


def _terms(query: str) -> list[tuple[str, Callable[[str], bool]]] | None:
    """An encoded query's terms as (field, test); ``None`` when a term is neither form."""
    terms: list[tuple[str, Callable[[str], bool]]] = []
    for term in query.split("^"):
        field, like, text = term.partition("LIKE")
        if like and field and "=" not in field:
            terms.append((field, functools.partial(_contains, text)))
            continue
        field, eq, value = term.partition("=")
        if not (eq and field and value):
            return None
        terms.append((field, functools.partial(operator.eq, value)))
    return terms
