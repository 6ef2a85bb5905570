"""Traces and metrics of the ingest: one span per delivered observation, one trace per incident.

Each observation is delivered inside a ``podmedic.ingest.deliver`` span that starts a new
trace: the Temporal client's ``TracingInterceptor`` carries it into the signal-with-start,
so the incident workflow and every activity it runs join that trace. An HTTP request gets
its own ``podmedic.ingest.http`` span, which every delivery span of the request links to
(a batch can open many incidents: one trace each, not one trace for all).

An observation that reaches an incident that is already open (same workflow run) gets a
span link to the span that opened it, so its trace points at the incident's trace instead
of standing alone; inside the workflow the SDK's ``HandleSignal`` span links back. The
opener is remembered per process (bounded): after a restart, or on another replica, the
first repeat links nowhere, and the workflow's signal span still ties the two together.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from types import TracebackType

from aiohttp import web
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Tracer

from podmedic.domain.maintenance import MaintenanceNotice
from podmedic.domain.models import ConfigProblem, PluginDevice, UnresolvedDevice
from podmedic.domain.stall import WorkloadStall
from podmedic.telemetry import setup
from podmedic.telemetry.interceptors import DEVICE, DRIVER, INCIDENT, NODE, POOL
from podmedic.telemetry.metrics import metrics
from workers.ingest.types import Observation

OPENERS_MAX = 100_000
_NOOP = trace.NoOpTracer()


def tracer() -> Tracer:
    """The installed tracer, or a no-op one (tracing off)."""
    installed = setup.current()
    found = installed.tracer if installed is not None else None
    return found if found is not None else _NOOP


def observation_attributes(item: Observation) -> dict[str, str | int]:
    """Span attributes of one observation: incident, driver, device, node, health, code, source."""
    if isinstance(item, WorkloadStall):
        return {INCIDENT: item.workflow_id, DRIVER: item.driver, "podmedic.source": item.source,
                "podmedic.event_id": item.event_id, "podmedic.stalled_s": int(item.stalled_s)}
    if isinstance(item, MaintenanceNotice):
        return {INCIDENT: item.workflow_id, NODE: item.node, "podmedic.source": item.source,
                "podmedic.event_id": item.event_id,
                "podmedic.deadline": item.deadline.isoformat() if item.deadline else item.problem or "none"}
    if isinstance(item, ConfigProblem):
        found: dict[str, str | int] = {INCIDENT: item.workflow_id, DRIVER: item.driver,
                                       "podmedic.source": item.source, "podmedic.event_id": item.event_id}
    elif isinstance(item, (UnresolvedDevice, PluginDevice)):
        resource_id = item.resource_id if isinstance(item, UnresolvedDevice) else item.name
        found = {INCIDENT: item.workflow_id, "podmedic.resource_id": resource_id,
                 "podmedic.health": item.health.value, "podmedic.source": item.source,
                 "podmedic.event_id": item.event_id}
    else:
        device = item.device
        found = {INCIDENT: device.workflow_id, DRIVER: device.driver, POOL: device.pool, DEVICE: device.resource_id,
                 "podmedic.health": item.health.value, "podmedic.source": item.source,
                 "podmedic.event_id": item.event_id}
        if item.code is not None:
            found["podmedic.code"] = item.code
    if item.node:
        found[NODE] = item.node
    return found


class IncidentOpeners:
    """Which span opened each incident run this process delivered to (bounded, oldest forgotten)."""

    def __init__(self, max_entries: int = OPENERS_MAX) -> None:
        self.max_entries = max_entries
        self._openers: OrderedDict[str, tuple[str, SpanContext]] = OrderedDict()

    def link_or_remember(self, incident_id: str, run_id: str, span: Span) -> SpanContext | None:
        """The opener's span context when ``run_id`` is the run already seen; else remember ``span``."""
        known = self._openers.get(incident_id)
        if known is not None and known[0] == run_id:
            return known[1]
        self._openers[incident_id] = (run_id, span.get_span_context())
        self._openers.move_to_end(incident_id)
        while len(self._openers) > self.max_entries:
            self._openers.popitem(last=False)
        return None


class DeliverySpan:
    """``with DeliverySpan(item, openers) as span: ...; span.done(result)``: span, link and counters."""

    def __init__(self, item: Observation, openers: IncidentOpeners) -> None:
        self.item = item
        self.openers = openers
        self.source = item.source
        parent = trace.get_current_span()
        links = [Link(parent.get_span_context())] if parent.get_span_context().is_valid else []
        # A fresh context: this observation's incident gets its own trace, not the request's.
        self._manager = tracer().start_as_current_span(
            "podmedic.ingest.deliver", context=otel_context.Context(), kind=SpanKind.PRODUCER,
            attributes=observation_attributes(item), links=links)
        self.span: Span = trace.INVALID_SPAN

    def __enter__(self) -> DeliverySpan:
        self.span = self._manager.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            metrics().ingest_events.add(1, {"source": self.source, "outcome": "failed"})
        self._manager.__exit__(kind, exc, tb)

    def done(self, incident_id: str | None, run_id: str | None, deduplicated: bool) -> None:
        """Record what delivery did: counters, and a link to the incident's opening span on a repeat."""
        outcome = "deduplicated" if deduplicated else "accepted"
        metrics().ingest_events.add(1, {"source": self.source, "outcome": outcome})
        self.span.set_attribute("podmedic.delivery", outcome)
        if incident_id and run_id:
            self.span.set_attribute("podmedic.run_id", run_id)
            opener = self.openers.link_or_remember(incident_id, run_id, self.span)
            if opener is not None:
                self.span.add_link(opener, {"podmedic.link": "incident"})
                self.span.set_attribute("podmedic.repeat", True)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def traced_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A span per HTTP request, and the count of refused ones by route and status."""
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    with tracer().start_as_current_span(f"podmedic.ingest.http {request.method} {route}", kind=SpanKind.SERVER,
                                        attributes={"http.request.method": request.method,
                                                    "http.route": route}) as span:
        response = await handler(request)
        span.set_attribute("http.response.status_code", response.status)
        if response.status >= 400 and request.method == "POST":
            metrics().ingest_rejected.add(1, {"route": route, "status": str(response.status)})
        return response
