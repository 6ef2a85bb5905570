"""The HTTP front of the ingest: external detectors post health events, incidents open.

Routes:
  ``POST /v1/events``        CloudEvents: ``application/cloudevents+json`` (one),
                             ``application/cloudevents-batch+json`` (a batch), or
                             ``application/json`` with ``ce-*`` headers (binary mode).
  ``POST /v1/alertmanager``  the Alertmanager webhook (v4), labels mapped to devices.
  ``POST /v1/tickets/{id}/resolved``  a vendor resolved a ticket (``workers/ingest/http/tickets.py``).
  ``GET  /v1/stats``         counters; ``GET /healthz`` liveness (no token needed).

202 is answered only after the ``Deliverer`` returned, i.e. once Temporal accepted every
event of the request: a 202 is a promise that the event is in an incident. A request is
all-or-nothing at parse time (one bad event refuses the batch, nothing is delivered), and
a 503 (Temporal unreachable) asks the sender to retry the whole request, which is safe:
what did get through is deduplicated by event id.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import ssl
from collections import Counter
from collections.abc import Callable, Sequence

from aiohttp import web
from temporalio.service import RPCError, RPCStatusCode

from workers.ingest.delivery import Delivered, Deliverer
from workers.ingest.errors import EventError
from workers.ingest.http import alertmanager, cloudevents, tickets
from workers.ingest.http.auth import CHALLENGE, BearerAuth, load_auth
from workers.ingest.settings import HttpSettings, IngestSettings
from workers.ingest.telemetry import traced_requests
from workers.ingest.types import Observation

log = logging.getLogger("podmedic.ingest.http")

EVENT_TYPES = (cloudevents.STRUCTURED, cloudevents.BATCH, cloudevents.BINARY)
ALERT_TYPES = ("application/json",)
# Temporal answers that mean "not now": the sender should retry later, nothing was lost.
_UNAVAILABLE = {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.RESOURCE_EXHAUSTED,
                RPCStatusCode.ABORTED, RPCStatusCode.CANCELLED, RPCStatusCode.UNKNOWN}


# What a route's parser hands on: observations to deliver, and input skipped with (where, why).
Parsed = tuple[list[Observation], list[tuple[str, str]]]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Refusal(Exception):
    """A request answered with an error status and a JSON body."""

    def __init__(self, status: int, body: dict[str, object], reason: str, headers: dict[str, str] | None = None):
        super().__init__(reason)
        self.status, self.body, self.reason, self.headers = status, body, reason, headers or {}


class IngestStats:
    """Counters behind ``GET /v1/stats``."""

    def __init__(self) -> None:
        self.requests = 0
        self.accepted = 0
        self.deduplicated = 0
        self.skipped = 0
        self.rejected: Counter[int] = Counter()


class IngestFront:
    """The handlers, bound to one deliverer and one set of settings."""

    def __init__(self, deliverer: Deliverer, settings: IngestSettings, auth: BearerAuth) -> None:
        self.deliverer = deliverer
        self.settings = settings
        self.http = settings.http
        self.auth = auth
        self.stats = IngestStats()

    # -- routes ------------------------------------------------------------------------
    async def events(self, request: web.Request) -> web.Response:
        """``POST /v1/events``."""
        return await self._handle(request, EVENT_TYPES, self._parse_events)

    async def alerts(self, request: web.Request) -> web.Response:
        """``POST /v1/alertmanager``."""
        return await self._handle(request, ALERT_TYPES, self._parse_alerts)

    async def healthz(self, request: web.Request) -> web.Response:
        """``GET /healthz``: the process serves; says nothing about Temporal."""
        return web.json_response({"ok": True})

    async def stats_view(self, request: web.Request) -> web.Response:
        """``GET /v1/stats``."""
        try:
            self._authorize(request)
        except Refusal as refusal:
            return self._refuse(request, refusal)
        s = self.stats
        return web.json_response({
            "requests": s.requests, "accepted": s.accepted, "deduplicated": s.deduplicated, "skipped": s.skipped,
            "rejected": sum(s.rejected.values()), "rejected_by_status": {str(k): v for k, v in s.rejected.items()},
            "round_trips": self.deliverer.delivered, "deliverer_deduplicated": self.deliverer.deduplicated,
            "in_flight": self.deliverer.in_flight,
        })

    # -- the request pipeline ------------------------------------------------------------
    async def _handle(self, request: web.Request, types: Sequence[str],
                      parse: Callable[[web.Request, bytes], Parsed]) -> web.Response:
        self.stats.requests += 1
        try:
            self._authorize(request)
            if request.content_type not in types:
                raise Refusal(415, {"error": "unsupported media type", "accepted": list(types)},
                              f"Content-Type {request.content_type!r} is not one of {', '.join(types)}")
            body = await self._read(request)
            items, skipped = parse(request, body)
            return await self._deliver(items, skipped)
        except Refusal as refusal:
            return self._refuse(request, refusal)

    def _authorize(self, request: web.Request) -> None:
        why = self.auth.check(request.headers.get("Authorization"))
        if why is not None:
            raise Refusal(401, {"error": "unauthorized", "what": why}, why, {"WWW-Authenticate": CHALLENGE})

    async def _read(self, request: web.Request) -> bytes:
        limit = self.http.max_body_bytes
        too_large = Refusal(413, {"error": "request body too large", "limit_bytes": limit},
                            f"body over the {limit}-byte limit")
        if request.content_length is not None and request.content_length > limit:
            raise too_large
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise too_large from None

    def _parse_events(self, request: web.Request, body: bytes) -> Parsed:
        try:
            if request.content_type == cloudevents.BATCH:
                batch = cloudevents.parse_batch(body)
                self._check_batch(len(batch))
                return list(batch), []
            if request.content_type == cloudevents.BINARY:
                if "ce-specversion" not in request.headers:
                    raise Refusal(415, {"error": "unsupported media type", "accepted": list(EVENT_TYPES),
                                        "what": "application/json is binary mode: it needs ce-specversion, ce-id, "
                                                "ce-source and ce-type headers"},
                                  "application/json without ce-* headers")
                return [cloudevents.parse_binary(request.headers, body)], []
            return [cloudevents.parse_structured(body)], []
        except EventError as err:
            raise Refusal(400, err.as_json(), str(err)) from None

    def _parse_alerts(self, request: web.Request, body: bytes) -> Parsed:
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            raise Refusal(400, EventError([("(body)", f"Invalid JSON{where}: {exc}")]).as_json(),
                          f"invalid JSON: {exc}") from None
        try:
            result = alertmanager.alerts_to_observations(payload, self.settings.alertmanager, _now())
        except EventError as err:
            raise Refusal(400, err.as_json(), str(err)) from None
        self._check_batch(len(result.events))
        for where, why in result.skipped:
            log.info("alertmanager alert skipped from %s: %s: %s", request.remote, where, why)
        return list(result.events), result.skipped

    def _check_batch(self, n: int) -> None:
        if n > self.http.max_batch:
            raise Refusal(413, {"error": "batch too large", "events": n, "limit_events": self.http.max_batch},
                          f"{n} events over the {self.http.max_batch}-event limit")

    async def _deliver(self, items: list[Observation], skipped: list[tuple[str, str]]) -> web.Response:
        try:
            # asyncio.timeout, unlike wait_for, costs no extra task: this is the per-event hot path.
            async with asyncio.timeout(self.http.deliver_timeout_s):
                if len(items) == 1:
                    done = [await self.deliverer.deliver(items[0])]
                else:
                    done = await self.deliverer.deliver_all(items)
        except RPCError as exc:
            if exc.status in _UNAVAILABLE:
                raise self._unavailable(str(exc)) from None
            log.error("Temporal refused %d event(s): %s", len(items), exc)
            raise Refusal(500, {"error": "Temporal refused the events", "what": str(exc)},
                          f"Temporal refused: {exc}") from None
        except TimeoutError:
            raise self._unavailable(f"no answer within {self.http.deliver_timeout_s:g}s") from None
        except Exception as exc:
            # The SDK reports an unreachable server as RuntimeError("Failed client connect ...");
            # whatever it is, nothing was acknowledged, so the sender's retry is the safe answer.
            log.exception("delivering %d event(s) failed", len(items))
            raise self._unavailable(str(exc)) from None
        return self._accepted(done, skipped)

    def _unavailable(self, why: str) -> Refusal:
        return Refusal(503, {"error": "Temporal unavailable; retry later", "what": why[:1000]},
                       f"Temporal unavailable: {why}", {"Retry-After": str(self.http.retry_after_s)})

    def _accepted(self, done: list[Delivered], skipped: list[tuple[str, str]]) -> web.Response:
        deduplicated = sum(1 for d in done if d.deduplicated)
        self.stats.accepted += len(done)
        self.stats.deduplicated += deduplicated
        self.stats.skipped += len(skipped)
        body: dict[str, object] = {"accepted": len(done),
                                   "incidents": list(dict.fromkeys(d.incident_id for d in done if d.incident_id)),
                                   "deduplicated": deduplicated}
        if skipped:
            body["skipped"] = [{"where": where, "why": why} for where, why in skipped]
        return web.json_response(body, status=202)

    def _refuse(self, request: web.Request, refusal: Refusal) -> web.Response:
        self.stats.rejected[refusal.status] += 1
        log.warning("%s %s from %s refused %d: %s", request.method, request.path, request.remote,
                    refusal.status, refusal.reason[:500])
        return web.json_response(refusal.body, status=refusal.status, headers=refusal.headers)


STATE = web.AppKey("podmedic_ingest_front", IngestFront)


def build_app(deliverer: Deliverer, settings: IngestSettings,
              ready: Callable[[], tuple[bool, str]] | None = None) -> web.Application:
    """The aiohttp application; raises ``AuthConfigError`` when no token is configured and
    unauthenticated access was not asked for. ``ready`` answers ``GET /readyz`` (probes need no
    token, like ``/healthz``): Temporal, the API server and the watches (``service.py``)."""
    h = settings.http
    front = IngestFront(deliverer, settings, load_auth(h.token_file, h.token_env, h.allow_unauthenticated))
    # aiohttp enforces the body limit while reading, so a chunked upload cannot bypass it.
    app = web.Application(client_max_size=h.max_body_bytes, middlewares=[traced_requests])
    app[STATE] = front
    app.router.add_post("/v1/events", front.events)
    app.router.add_post("/v1/alertmanager", front.alerts)
    app.router.add_get("/v1/stats", front.stats_view)
    app.router.add_get("/healthz", front.healthz)

    async def readyz(_: web.Request) -> web.Response:
        ok, text = ready() if ready is not None else (True, "ready\n")
        return web.Response(status=200 if ok else 503, text=text)
    app.router.add_get("/readyz", readyz)
    tickets.register(app, front)  # POST /v1/tickets/{id}/resolved
    return app


def ssl_context(http: HttpSettings) -> ssl.SSLContext | None:
    """A server TLS context when the settings name a certificate, else ``None`` (plain HTTP)."""
    if http.tls_cert_file is None or http.tls_key_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(http.tls_cert_file, http.tls_key_file)
    return context


async def start_site(app: web.Application, http: HttpSettings) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on ``http.host:http.port`` (HTTPS when configured); returns the runner
    (``await runner.cleanup()`` stops it) and the base URL, with the real port when 0 was asked."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context = ssl_context(http)
    site = web.TCPSite(runner, http.host, http.port, ssl_context=context)
    await site.start()
    host, port = runner.addresses[0][:2]
    scheme = "https" if context else "http"
    return runner, f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

