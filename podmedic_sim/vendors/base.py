"""What the fake ticket systems share: a hold on create answers, auto-resolution, the simulator hook.

The fakes (Jira, ServiceNow; the webhook desk lives in ``podmedic_sim/vendors/desk.py``) are real
HTTP servers speaking each system's API shape, for the demo and the end-to-end tests. A
test can make a fake *hold* its answer to a create after recording the ticket, so it can
kill the worker between the backend receiving the create and the activity completing.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

log = logging.getLogger("podmedic.vendor")


def basic(user: str, secret: str) -> str:
    """The ``Authorization`` value of HTTP basic auth."""
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


class FakeDesk:
    """Base of the fakes: ``tickets`` by id, each with ``created`` and ``device`` (from the evidence)."""

    def __init__(self, *, sim_url: str | None = None, resolve_after_s: float | None = None) -> None:
        self.sim_url = sim_url
        self.resolve_after_s = resolve_after_s
        self.tickets: dict[str, dict[str, Any]] = {}
        self.creates_received = 0
        self.hold_creates = False
        self.release = asyncio.Event()
        self.rejected: list[str] = []
        self.throttled = 0  # how many of the next requests get the system's rate-limit answer
        self.retry_after_s = 1

    def throttle(self, requests: int, retry_after_s: int = 1) -> None:
        """Answer the next ``requests`` requests as the system does when its rate limit is hit."""
        self.throttled, self.retry_after_s = requests, retry_after_s

    def rate_limited(self) -> web.Response:
        """The system's 429 (subclasses give its headers and body)."""
        return web.json_response({"error": "rate limited"}, status=429,
                                 headers={"Retry-After": str(self.retry_after_s)})

    @web.middleware
    async def _throttle(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.throttled > 0 and not request.path.startswith(("/fake/", "/healthz")):
            self.throttled -= 1
            self.rejected.append(f"rate limited: {request.method} {request.path}")
            return self.rate_limited()
        response: web.StreamResponse = await handler(request)
        return response

    async def held(self) -> None:
        """Wait here (the ticket already exists) while a test holds create answers."""
        if self.hold_creates:
            await self.release.wait()

    def refuse(self, status: int, why: str, body: dict[str, Any] | None = None) -> web.Response:
        """An error answer, remembered so tests can say what the client got wrong."""
        self.rejected.append(why)
        return web.json_response(body or {"error": why}, status=status)

    async def mark_healthy(self, device: dict[str, Any], ticket_id: str) -> None:
        """Tell the simulator the device was replaced (when a simulator URL was given)."""
        if not (self.sim_url and device):
            return
        payload: dict[str, Any] = {k: device[k] for k in ("driver", "pool", "device") if k in device}
        payload.update(health="Healthy", reason="DeviceReplaced", message=f"replaced under {ticket_id}")
        async with aiohttp.ClientSession() as session, \
                session.post(f"{self.sim_url}/sim/v1/faults/device", json=payload) as resp:
            if resp.status >= 300:
                log.warning("could not mark %s healthy: %s", device, await resp.text())

    async def resolve(self, ticket_id: str) -> None:
        """Resolve a ticket the way the system would (subclasses set the status fields)."""
        raise NotImplementedError

    def open_ids(self) -> list[str]:
        """Ids of tickets not yet resolved (subclasses decide what resolved means)."""
        raise NotImplementedError

    async def _auto_resolve(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            if self.resolve_after_s is None:
                continue
            for ticket_id in self.open_ids():
                if time.time() - self.tickets[ticket_id]["created"] >= self.resolve_after_s:
                    try:
                        await self.mark_healthy(self.tickets[ticket_id].get("device") or {}, ticket_id)
                        await self.resolve(ticket_id)
                    except aiohttp.ClientError as exc:
                        log.warning("resolving %s failed: %s", ticket_id, exc)

    def routes(self) -> list[web.RouteDef]:
        """The system's routes (subclasses)."""
        raise NotImplementedError

    def app(self) -> web.Application:
        """The HTTP application, with the auto-resolver running in the background."""
        app = web.Application(middlewares=[self._throttle])
        app.add_routes([*self.routes(), web.get("/healthz", self._healthz),
                        web.post("/fake/resolve/{id}", self._resolve_route)])

        async def background(app: web.Application) -> AsyncIterator[None]:
            task = asyncio.create_task(self._auto_resolve())
            yield
            task.cancel()

        app.cleanup_ctx.append(background)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "tickets": len(self.tickets)})

    async def _resolve_route(self, request: web.Request) -> web.Response:
        ticket_id = request.match_info["id"]
        if ticket_id not in self.tickets:
            return web.json_response({"error": "no such ticket"}, status=404)
        await self.resolve(ticket_id)
        return web.json_response(self.tickets[ticket_id])


def device_in(text: str) -> dict[str, Any]:
    """The device a podmedic ticket title names (``podmedic: driver/pool/device on node: ...``), or {}."""
    m = re.search(r"podmedic: ([^/\s]+)/([^/\s]+)/([^/\s]+) on ", text)
    return dict(zip(("driver", "pool", "device"), m.groups(), strict=True)) if m else {}
