"""Installing telemetry in a process: providers, exporters, the Temporal runtime and interceptors.

``install`` is called once by ``podmedic worker`` / ``podmedic ingest`` (and by tests, with
in-memory readers and exporters); ``podmedic.temporal.connect.connect`` then builds every client on
the installed Runtime with the tracing and activity-metrics interceptors, which the worker
inherits from its client. Nothing is global in OpenTelemetry's sense: the providers are
podmedic's own, so a library's ``set_tracer_provider`` never fights with ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Tracer
from temporalio.runtime import Runtime

from podmedic.telemetry.metrics import PodmedicMetrics, use
from podmedic.telemetry.settings import TelemetrySettings
from podmedic.telemetry.temporal_bridge import TemporalMetricBridge

log = logging.getLogger("podmedic.telemetry")

SCOPE = "podmedic"
# Seconds from a device's failure to its taint or recovery: from sub-second to hours (vendor waits).
INCIDENT_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)
# One activity attempt or one Temporal RPC/poll: milliseconds to a minute.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass
class Telemetry:
    """What ``install`` set up; ``shutdown`` flushes and stops it."""

    settings: TelemetrySettings
    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider | None
    bridge: TemporalMetricBridge | None
    prometheus_url: str | None = None
    _server: Any = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def tracer(self) -> Tracer | None:
        """The tracer of podmedic's spans (``None``: tracing off)."""
        return self.tracer_provider.get_tracer(SCOPE) if self.tracer_provider else None

    @property
    def runtime(self) -> Runtime | None:
        """The Temporal Runtime every client of this process must use (``None``: the SDK default)."""
        return self.bridge.runtime if self.bridge else None

    def client_interceptors(self) -> list[Any]:
        """Tracing (when on) outermost, then activity metrics (when on): the worker inherits both."""
        from podmedic.telemetry.interceptors import ActivityMetricsInterceptor, PodmedicTracingInterceptor

        found: list[Any] = []
        if self.tracer is not None:
            found.append(PodmedicTracingInterceptor(self.tracer))
        if self.meter_provider is not None:
            found.append(ActivityMetricsInterceptor())
        return found

    def start_background(self) -> None:
        """Drain the Temporal SDK's metrics every second on the running loop."""
        if self.bridge is not None and not self._tasks:
            self._tasks.append(asyncio.get_running_loop().create_task(self.bridge.drain_forever()))

    def flush(self) -> None:
        """Move buffered Temporal metrics and finished spans on now (tests, shutdown)."""
        if self.bridge is not None:
            self.bridge.drain()
        if self.tracer_provider is not None:
            self.tracer_provider.force_flush()

    def shutdown(self) -> None:
        """Flush, stop exporters and the endpoint, and go back to no-op instruments."""
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        with contextlib.suppress(Exception):
            self.flush()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self.meter_provider is not None:
            self.meter_provider.shutdown()
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        use(None)
        global _installed
        if _installed is self:
            _installed = None


_installed: Telemetry | None = None


def current() -> Telemetry | None:
    """The installed telemetry, if any."""
    return _installed


def install(settings: TelemetrySettings, *, metric_readers: Sequence[MetricReader] = (),
            span_exporter: SpanExporter | None = None) -> Telemetry:
    """Set up what ``settings`` ask for, plus extra readers/exporters (tests' in-memory ones).

    Replaces (and shuts down) an earlier installation of this process.
    """
    global _installed
    if _installed is not None:
        _installed.shutdown()
    resource = Resource.create({"service.name": settings.service_name})
    readers = list(metric_readers)
    registry = None
    if settings.prometheus_port is not None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry

        # A registry of our own: several installs in one process (tests) never collide.
        registry = CollectorRegistry()
        readers.append(PrometheusMetricReader(registry=registry))
    if settings.otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=f"{settings.otlp_endpoint}/v1/metrics"),
            export_interval_millis=settings.export_interval_s * 1000))
    telemetry = Telemetry(settings, _tracer_provider(settings, resource, span_exporter), None, None)
    if readers:
        telemetry.meter_provider = MeterProvider(metric_readers=readers, resource=resource, views=_views())
        meter = telemetry.meter_provider.get_meter(SCOPE)
        use(PodmedicMetrics(meter))
        telemetry.bridge = TemporalMetricBridge(telemetry.meter_provider.get_meter("temporalio"),
                                                settings.service_name)
    if registry is not None and settings.prometheus_port is not None:
        from prometheus_client import start_http_server

        server, _thread = start_http_server(settings.prometheus_port, settings.prometheus_host, registry=registry)
        telemetry._server = server
        host = settings.prometheus_host
        telemetry.prometheus_url = f"http://{f'[{host}]' if ':' in host else host}:{server.server_port}/metrics"
        log.info("Prometheus metrics on %s", telemetry.prometheus_url)
    _installed = telemetry
    return telemetry


def _tracer_provider(settings: TelemetrySettings, resource: Resource,
                     span_exporter: SpanExporter | None) -> TracerProvider | None:
    if settings.sampling_ratio <= 0 or (span_exporter is None and settings.otlp_endpoint is None):
        return None
    # Parent-based: an incident's trace is kept or dropped whole, as its ingest span decided.
    provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(settings.sampling_ratio)))
    if span_exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    if settings.otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{settings.otlp_endpoint}/v1/traces")))
    return provider


def _views() -> list[View]:
    return [
        View(instrument_name="podmedic_time_to_*", aggregation=ExplicitBucketHistogramAggregation(INCIDENT_BUCKETS)),
        View(instrument_name="podmedic_action_duration", aggregation=ExplicitBucketHistogramAggregation(CALL_BUCKETS)),
        View(instrument_name="temporal_*", instrument_type=Histogram,
             aggregation=ExplicitBucketHistogramAggregation(CALL_BUCKETS)),
    ]
