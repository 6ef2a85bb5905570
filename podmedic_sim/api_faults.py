"""API fault injection: latency, error responses and watch disconnects on chosen verbs and resources.

Rules come from ``POST /sim/v1/faults/api`` or ``SimCluster.add_api_fault``; the
middleware applies them to Kubernetes routes only (``/api``, ``/apis``), never to
``/sim/v1`` so a test can always clear what it injected. ``probability`` makes a rule hit
only that share of matching calls (``0.3``: 30%), so a flaky API server can be simulated.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from podmedic_sim.audit import component_of
from podmedic_sim.handlers_common import ApiError, error_response, json_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MESSAGES = {
    429: "Too many requests, please try again later (injected by the simulator).",
    500: "Internal error (injected by the simulator).",
    503: "The server is currently unable to handle the request (injected by the simulator).",
    409: "Operation cannot be fulfilled: the object has been modified (injected by the simulator).",
    403: "Forbidden: the caller lacks the permission for this request (injected by the simulator).",
    422: "Unprocessable entity: the object is invalid (injected by the simulator).",
}
STATUSES = (403, 409, 422, 429, 500, 503)


class ApiFault(BaseModel):
    """One fault rule. Empty ``verbs``/``resources`` match everything."""

    model_config = ConfigDict(extra="forbid")

    verbs: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    components: list[str] = Field(
        default_factory=list, description="Only requests of these podmedic components (User-Agent "
        "``podmedic-<component>/...``: worker, ingest); empty matches every client.")
    status: int | None = Field(None, description="403, 409, 422, 429, 500 or 503; none for latency only.")
    latency_ms: float = Field(0, ge=0)
    hold: bool = Field(
        False, description="Hold matching requests until the rules are cleared (DELETE), then serve them: "
        "a test sees the call in flight (GET's ``held``) and acts while it is, e.g. kills the caller.")
    disconnect_after_ms: float | None = Field(
        None, ge=0, description="Watches only: drop the connection this long after the watch started, "
        "mid-stream, as a failing API server or load balancer does.")
    probability: float = Field(1.0, ge=0, le=1)
    duration_s: float | None = Field(None, gt=0)
    count: int | None = Field(None, ge=1)

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: int | None) -> int | None:
        if value is not None and value not in STATUSES:
            raise ValueError(f"must be one of {', '.join(map(str, STATUSES))}")
        return value


class _Active:
    def __init__(self, fault: ApiFault) -> None:
        self.fault = fault
        self.expires = time.monotonic() + fault.duration_s if fault.duration_s else None
        self.left = fault.count

    def live(self) -> bool:
        return (self.expires is None or time.monotonic() < self.expires) and (
            self.left is None or self.left > 0
        )


def request_verb(request: web.Request) -> str:
    """The Kubernetes verb of a request (get, list, watch, create, update, patch, delete...)."""
    method = request.method
    parts = [p for p in request.path.split("/") if p]
    # /api/v1/<plural>[/<name>] or /apis/<g>/<v>/...; namespaced paths add two segments.
    rest = parts[2:] if parts and parts[0] == "api" else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
        rest = rest[2:]
    is_item = len(rest) >= 2
    if method == "GET":
        if request.query.get("watch", "").lower() in ("true", "1"):
            return "watch"
        return "get" if is_item else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if is_item else "deletecollection"
    return method.lower()


def request_resource(request: web.Request) -> str:
    """``pods``, ``pods/status``, ``nodes``... of a Kubernetes API path."""
    parts = [p for p in request.path.split("/") if p]
    rest = parts[2:] if parts and parts[0] == "api" else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
        rest = rest[2:]
    if not rest:
        return ""
    return f"{rest[0]}/{rest[2]}" if len(rest) >= 3 else rest[0]


class ApiFaults:
    """The active fault rules and the middleware that applies them."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rules: list[_Active] = []
        self._rng = rng or random.Random()
        self.held = 0  # requests held by a ``hold`` rule right now
        self._release: asyncio.Event | None = None

    def add(self, fault: ApiFault) -> None:
        """Activate a rule."""
        self._rules.append(_Active(fault))

    def clear(self) -> None:
        """Drop every rule; held requests go on to be served."""
        self._rules.clear()
        if self._release is not None:
            self._release.set()
            self._release = None

    def active(self) -> list[ApiFault]:
        """Rules still in force."""
        self._rules = [r for r in self._rules if r.live()]
        return [r.fault for r in self._rules]

    def _pick(self, verb: str, resource: str, component: str | None) -> _Active | None:
        for rule in self._rules:
            f = rule.fault
            if not rule.live():
                continue
            if f.verbs and verb not in f.verbs:
                continue
            if f.components and component not in f.components:
                continue
            if (
                f.resources
                and resource not in f.resources
                and resource.split("/")[0] not in f.resources
            ):
                continue
            if self._rng.random() >= f.probability:
                continue
            if rule.left is not None:
                rule.left -= 1
            return rule
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Delay or fail matching Kubernetes API requests."""
        path = request.path
        if not (path.startswith("/api/") or path.startswith("/apis/")) or not self._rules:
            return await handler(request)
        rule = self._pick(request_verb(request), request_resource(request), component_of(request))
        if rule is None:
            return await handler(request)
        if rule.fault.hold:
            release = self._release = self._release or asyncio.Event()
            self.held += 1
            try:
                await release.wait()
            finally:
                self.held -= 1
        if rule.fault.latency_ms:
            await asyncio.sleep(rule.fault.latency_ms / 1000)
        if rule.fault.disconnect_after_ms is not None and request_verb(request) == "watch":
            return await self._disconnect(request, handler, rule.fault.disconnect_after_ms / 1000)
        if rule.fault.status:
            code = rule.fault.status
            headers = {"Retry-After": "1"} if code == 429 else {}
            return error_response(
                ApiError(code, MESSAGES.get(code, "Injected error."), headers=headers)
            )
        return await handler(request)

    @staticmethod
    async def _disconnect(request: web.Request, handler: Handler, after_s: float) -> web.StreamResponse:
        """Serve the watch, then cut the TCP connection without ending the chunked stream."""
        serving = asyncio.ensure_future(handler(request))
        done, _ = await asyncio.wait({serving}, timeout=after_s)
        if serving in done:
            return serving.result()
        if request.transport is not None:
            request.transport.abort()
        serving.cancel()
        try:
            return await serving
        except asyncio.CancelledError:
            # The client already saw the stream break; this answer goes nowhere.
            return web.Response(status=200)

    async def handle_post(self, request: web.Request) -> web.Response:
        """POST /sim/v1/faults/api."""
        try:
            fault = ApiFault.model_validate_json(await request.read())
        except ValidationError as exc:
            return json_response({"error": exc.errors(include_url=False, include_context=False)}, 400)
        self.add(fault)
        return json_response({"active": [f.model_dump() for f in self.active()], "held": self.held}, 201)

    async def handle_delete(self, request: web.Request) -> web.Response:
        """DELETE /sim/v1/faults/api."""
        self.clear()
        return json_response({"active": []})

    async def handle_get(self, request: web.Request) -> web.Response:
        """GET /sim/v1/faults/api: the rules in force, and how many requests they hold now."""
        return json_response({"active": [f.model_dump() for f in self.active()], "held": self.held})

    def routes(self) -> list[web.RouteDef]:
        """The ``/sim/v1/faults/api`` routes."""
        return [
            web.post("/sim/v1/faults/api", self.handle_post),
            web.delete("/sim/v1/faults/api", self.handle_delete),
            web.get("/sim/v1/faults/api", self.handle_get),
        ]


def describe(faults: list[ApiFault]) -> list[dict[str, Any]]:
    """JSON form of rules (for state dumps)."""
    return [f.model_dump() for f in faults]
