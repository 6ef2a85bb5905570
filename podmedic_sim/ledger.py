"""A ledger of every Kubernetes API request podmedic's components made, with its answer.

The audit recorder (``audit.py``) keeps the set of permissions; this keeps counts, so a fault
suite can prove from the API server's side, not from podmedic's own view, that nothing was
done twice: how many DeviceTaintRules were created per device, how many evictions each pod
got, and how many answers were injected errors. ``GET /sim/v1/ledger`` returns the entries;
``DELETE /sim/v1/ledger`` forgets them. Test clients (no ``podmedic`` User-Agent) are not
counted, so a suite's own reads never pollute the figures.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from aiohttp import web

from podmedic_sim.audit import component_of, strongest
from podmedic_sim.handlers_common import json_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Entry:
    """One kind of request and its answer; counted in ``RequestLedger.counts``."""

    component: str
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    status: int
    device: str = ""
    """``driver/pool/device`` a DeviceTaintRule create selected (the rule's identity for a suite)."""


def _name_and_namespace(path: str) -> tuple[str, str]:
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
        namespace, rest = rest[1], rest[2:]
    return (rest[1] if len(rest) > 1 else ""), namespace


def _selected_device(raw: bytes) -> str:
    try:
        selector = json.loads(raw)["spec"]["deviceSelector"]
        return f"{selector['driver']}/{selector['pool']}/{selector['device']}"
    except (ValueError, KeyError, TypeError):
        return ""


class RequestLedger:
    """Counts podmedic's requests by kind and answer (bounded by the kinds, not by traffic)."""

    def __init__(self) -> None:
        self.counts: Counter[Entry] = Counter()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Count the request once its answer (real or injected) is known."""
        component = component_of(request)
        kind = None
        if component is not None:
            watch = request.query.get("watch", "").lower() in ("true", "1")
            kind = strongest(request.method, request.path, watch)
        if kind is None:
            return await handler(request)
        verb, _, resource, sub = kind
        device = ""
        if resource == "devicetaintrules" and verb == "create":
            device = _selected_device(await request.read())  # aiohttp keeps the body for the handler
        name, namespace = _name_and_namespace(request.path)
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            assert component is not None
            self.counts[Entry(component, verb, resource, sub, namespace, name, status, device)] += 1

    def entries(self) -> list[dict[str, object]]:
        """Every entry with its ``count``."""
        return [{**asdict(entry), "count": n} for entry, n in self.counts.items()]

    async def handle_get(self, request: web.Request) -> web.Response:
        """GET /sim/v1/ledger."""
        return json_response({"entries": self.entries()})

    async def handle_delete(self, request: web.Request) -> web.Response:
        """DELETE /sim/v1/ledger."""
        self.counts.clear()
        return json_response({"entries": []})

    def routes(self) -> list[web.RouteDef]:
        """The ``/sim/v1/ledger`` routes."""
        return [web.get("/sim/v1/ledger", self.handle_get), web.delete("/sim/v1/ledger", self.handle_delete)]
