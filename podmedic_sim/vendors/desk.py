"""A vendor ticket desk speaking podmedic's generic webhook shape (``podmedic vendor-desk``).

``--shape jira`` or ``--shape servicenow`` serves the fakes of ``podmedic_sim/vendors/`` instead.

Stands in for a hardware vendor's RMA system in the demo and the end-to-end tests: it
receives tickets (one per ``Idempotency-Key``), answers their status, and, when given the
simulator's URL, "replaces" a ticketed device after a delay by reporting it Healthy again
and resolving the ticket. Tickets persist to a JSON file so a restart loses none.

With a secret, a post must carry a Standard Webhooks signature (https://www.standardwebhooks.com),
checked by the spec's reference library: a wrong signature, or a timestamp more than 5 minutes off
the desk's clock (a captured request replayed), is refused 401 with the reason. ``accept_legacy``
also takes the old ``X-Podmedic-Signature`` alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from standardwebhooks import Webhook, WebhookVerificationError

from podmedic.domain.ticket_policy import signing_key

log = logging.getLogger("podmedic.vendor")


class VendorDesk:
    """Tickets in memory (and in ``store`` when given), keyed by id and by idempotency key."""

    def __init__(self, *, sim_url: str | None = None, resolve_after_s: float | None = None,
                 store: Path | None = None, secret: str | None = None, accept_legacy: bool = False) -> None:
        self.secret = secret
        self.accept_legacy = accept_legacy
        self.hold_creates = False
        self.release = asyncio.Event()
        self.held = 0  # create answers held now (the ticket already filed)
        self.rejected: list[str] = []
        self.sim_url = sim_url
        self.resolve_after_s = resolve_after_s
        self.store = store
        self.tickets: dict[str, dict[str, Any]] = {}
        self.posts = 0
        if store and store.exists():
            self.tickets = json.loads(store.read_text())

    def _save(self) -> None:
        if self.store:
            tmp = self.store.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.tickets, indent=1))
            tmp.replace(self.store)

    async def _signed_body(self, request: web.Request) -> tuple[str, dict[str, Any]] | web.Response:
        """The Idempotency-Key and the JSON body of a signed post, or the error answer."""
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return web.json_response({"error": "Idempotency-Key header is required"}, status=400)
        raw = await request.read()
        if self.secret is not None and (refused := self._refused(raw, request)):
            self.rejected.append(refused)
            return web.json_response({"error": refused}, status=401)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "body is not JSON"}, status=400)
        return key, body

    def _refused(self, raw: bytes, request: web.Request) -> str:
        """Why the post's signature is refused, or ``""``."""
        assert self.secret is not None
        if self.accept_legacy and "webhook-signature" not in request.headers:
            expected = "sha256=" + hmac.new(self.secret.encode(), raw, hashlib.sha256).hexdigest()
            good = hmac.compare_digest(request.headers.get("X-Podmedic-Signature", ""), expected)
            return "" if good else "bad or missing X-Podmedic-Signature"
        try:
            Webhook(signing_key(self.secret)).verify(raw, dict(request.headers), json_parse=False)
        except WebhookVerificationError as err:
            return f"webhook signature refused: {err}"
        return ""

    async def update(self, request: web.Request) -> web.Response:
        """Add a later incident's evidence (or a note: the device is back in service) to an open ticket, once
        per Idempotency-Key; 404 for an unknown ticket, 409 for a resolved one (the sender then files a new
        ticket)."""
        self.posts += 1
        signed = await self._signed_body(request)
        if isinstance(signed, web.Response):
            return signed
        key, body = signed
        ticket = self.tickets.get(request.match_info["id"])
        if ticket is None:
            return web.json_response({"error": "no such ticket"}, status=404)
        if ticket["status"] != "open":
            return web.json_response({"error": f"ticket {ticket['id']} is {ticket['status']}"}, status=409)
        updates = ticket.setdefault("updates", [])
        if not any(u["idempotency_key"] == key for u in updates):
            updates.append({"idempotency_key": key, "at": time.time(), "incident": body.get("incident", ""),
                            "evidence": body.get("evidence", {}), "note": body.get("note", "")})
            self._save()
            log.info("ticket %s updated by %s", ticket["id"], body.get("incident", ""))
        return web.json_response({"id": ticket["id"], "updates": len(updates)}, status=201)

    async def create(self, request: web.Request) -> web.Response:
        """File a ticket; the same Idempotency-Key returns the first ticket."""
        self.posts += 1
        signed = await self._signed_body(request)
        if isinstance(signed, web.Response):
            return signed
        key, body = signed
        for ticket in self.tickets.values():
            if ticket["idempotency_key"] == key:
                return web.json_response(ticket, status=200)
        ticket_id = f"VND-{len(self.tickets) + 1:04d}"
        ticket = {"id": ticket_id, "idempotency_key": key, "status": "open", "created": time.time(),
                  "title": body.get("title", ""), "evidence": body.get("evidence", {})}
        self.tickets[ticket_id] = ticket
        self._save()
        log.info("ticket %s filed: %s", ticket_id, ticket["title"])
        if self.hold_creates:  # a test kills the worker while the answer is held
            self.held += 1
            try:
                await self.release.wait()
            finally:
                self.held -= 1
        return web.json_response(ticket, status=201)

    async def hold(self, request: web.Request) -> web.Response:
        """``POST /desk/hold {"hold": bool}``: hold create answers (after filing), or release them;
        ``GET /desk/hold``: whether it holds, and how many answers it holds now."""
        if request.method == "POST":
            try:
                wanted = (await request.json())["hold"]
            except (json.JSONDecodeError, KeyError, TypeError):
                return web.json_response({"error": 'body must be {"hold": true|false}'}, status=400)
            if not isinstance(wanted, bool):
                return web.json_response({"error": "hold: must be true or false"}, status=400)
            self.hold_creates = wanted
            if not wanted:
                self.release.set()
                self.release = asyncio.Event()
        return web.json_response({"hold": self.hold_creates, "held": self.held})

    async def get(self, request: web.Request) -> web.Response:
        """One ticket's status."""
        ticket = self.tickets.get(request.match_info["id"])
        if ticket is None:
            return web.json_response({"error": "no such ticket"}, status=404)
        return web.json_response(ticket)

    async def list(self, request: web.Request) -> web.Response:
        """Every ticket."""
        return web.json_response(list(self.tickets.values()))

    async def resolve(self, request: web.Request) -> web.Response:
        """Mark a ticket resolved by hand."""
        ticket = self.tickets.get(request.match_info["id"])
        if ticket is None:
            return web.json_response({"error": "no such ticket"}, status=404)
        await self._resolve(ticket)
        return web.json_response(ticket)

    async def healthz(self, request: web.Request) -> web.Response:
        """Liveness for ``podmedic up``."""
        return web.json_response({"ok": True, "tickets": len(self.tickets)})

    async def _resolve(self, ticket: dict[str, Any]) -> None:
        device = ticket.get("evidence", {}).get("device") or {}
        if self.sim_url and device:
            payload = {**{k: device[k] for k in ("driver", "pool", "device") if k in device}, "health": "Healthy",
                       "reason": "DeviceReplaced", "message": f"replaced under {ticket['id']}"}
            async with aiohttp.ClientSession() as session, \
                    session.post(f"{self.sim_url}/sim/v1/faults/device", json=payload) as resp:
                if resp.status >= 300:
                    log.warning("could not mark %s healthy: %s", device, await resp.text())
        ticket["status"] = "resolved"
        self._save()
        log.info("ticket %s resolved", ticket["id"])

    async def _auto_resolve(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            now = time.time()
            for ticket in list(self.tickets.values()):
                if ticket["status"] == "open" and self.resolve_after_s is not None \
                        and now - ticket["created"] >= self.resolve_after_s:
                    try:
                        await self._resolve(ticket)
                    except aiohttp.ClientError as exc:
                        log.warning("resolving %s failed: %s", ticket["id"], exc)

    def app(self) -> web.Application:
        """The HTTP application."""
        app = web.Application()
        app.add_routes([
            web.post("/tickets", self.create), web.get("/tickets", self.list),
            web.get("/tickets/{id}", self.get), web.post("/tickets/{id}/resolve", self.resolve),
            web.post("/tickets/{id}/updates", self.update),
            web.get("/healthz", self.healthz), web.post("/desk/hold", self.hold), web.get("/desk/hold", self.hold),
        ])

        async def background(app: web.Application) -> Any:
            task = asyncio.create_task(self._auto_resolve())
            yield
            task.cancel()

        app.cleanup_ctx.append(background)
        return app


def serve(port: int, sim_url: str | None, resolve_after_s: float | None, store: Path | None,
          shape: str = "webhook") -> None:
    """Run the desk (webhook shape, or the Jira / ServiceNow fake) until interrupted."""
    from podmedic_sim.vendors.jira import FakeJira
    from podmedic_sim.vendors.servicenow import FakeServiceNow

    if shape == "jira":
        app = FakeJira(sim_url=sim_url, resolve_after_s=resolve_after_s).app()
    elif shape == "servicenow":
        app = FakeServiceNow(sim_url=sim_url, resolve_after_s=resolve_after_s).app()
    else:
        app = VendorDesk(sim_url=sim_url, resolve_after_s=resolve_after_s, store=store).app()
    web.run_app(app, host="127.0.0.1", port=port, print=None)


@contextlib.asynccontextmanager
async def running_desk(sim_url: str | None, resolve_after_s: float | None) -> AsyncIterator[tuple[VendorDesk, str]]:
    """A webhook-shaped desk on a free loopback port while the block runs: the desk and its tickets URL."""
    desk = VendorDesk(sim_url=sim_url, resolve_after_s=resolve_after_s)
    runner = web.AppRunner(desk.app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield desk, f"http://127.0.0.1:{runner.addresses[0][1]}/tickets"
    finally:
        await runner.cleanup()
