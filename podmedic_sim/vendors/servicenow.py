"""A fake ServiceNow Table API, strict about basic auth and the record's fields.

Routes: ``POST /api/now/table/{table}`` (answers ``{"result": {...}}`` with ``sys_id`` and a
``number`` like INC0010001) and ``GET /api/now/table/{table}?sysparm_query=<field>=<value>``.
Records start in state 1 (New); resolving sets state 6 (Resolved).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiohttp import web

from podmedic_sim.vendors.base import FakeDesk, basic, device_in

RESOLVED = "6"


class FakeServiceNow(FakeDesk):
    """Records of the tables podmedic writes to."""

    def __init__(self, *, user: str = "podmedic", password: str = "sn-password", table: str = "incident",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.auth = basic(user, password)
        self.table = table

    def _check(self, request: web.Request, what: str) -> web.Response | None:
        if request.headers.get("Authorization") != self.auth:
            return self.refuse(401, f"{what}: bad or missing Authorization",
                               {"error": {"message": "User Not Authenticated"}, "status": "failure"})
        if request.match_info["table"] != self.table:
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
        """``GET /api/now/table/{table}?sysparm_query=field=value``."""
        refused = self._check(request, "query")
        if refused:
            return refused
        field, _, value = request.query.get("sysparm_query", "").partition("=")
        if not field or not value:
            return self.refuse(400, "query: sysparm_query must be field=value")
        rows = [{k: t.get(k) for k in ("sys_id", "number", "state")} for t in self.tickets.values()
                if str(t.get(field)) == value]
        return web.json_response({"result": rows[: int(request.query.get("sysparm_limit", "100"))]})

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
        return [web.post("/api/now/table/{table}", self.create), web.get("/api/now/table/{table}", self.query)]
