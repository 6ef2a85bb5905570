"""Temporal SDK metrics (Core's and ``workflow.metric_meter()``'s) into the OpenTelemetry SDK.

The SDK's Runtime can export by itself (its own Prometheus port, or OTLP/gRPC), but then a
process would serve two metrics endpoints with two configurations. Instead the Runtime
records into a ``MetricBuffer`` and this bridge replays each buffered update into an
OpenTelemetry instrument of the same name, so Temporal's metrics (``temporal_*``) and
podmedic's (``podmedic_*``) leave through the same Prometheus endpoint and OTLP exporter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any, Protocol

from opentelemetry.metrics import Counter, Histogram, Meter
from opentelemetry.util.types import Attributes
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_GAUGE,
    BufferedMetric,
    BufferedMetricUpdate,
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
)

log = logging.getLogger("podmedic.telemetry.temporal")

# Large, as the SDK asks: a busy worker records thousands of updates between two drains.
BUFFER_SIZE = 200_000
DRAIN_INTERVAL_S = 1.0



class SynchronousGauge(Protocol):
    """What ``Meter.create_gauge`` returns, by what it does: the API exports its class only under a private
    name (``opentelemetry.metrics._Gauge``)."""

    def set(self, amount: int | float, attributes: Attributes = None) -> None: ...


Instrument = Counter | Histogram | SynchronousGauge


class TemporalMetricBridge:
    """A Runtime whose metrics land in ``meter``; ``drain()`` moves what was buffered."""

    def __init__(self, meter: Meter, service_name: str) -> None:
        self.meter = meter
        self.buffer = MetricBuffer(BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)
        self.runtime = Runtime(telemetry=TelemetryConfig(metrics=self.buffer,
                                                         global_tags={"service_name": service_name},
                                                         attach_service_name=False))
        self._instruments: dict[int, Instrument] = {}
        self._attributes: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.updates = 0

    def drain(self) -> int:
        """Replay every buffered update into OpenTelemetry; returns how many there were."""
        with self._lock:
            updates = self.buffer.retrieve_updates()
            for update in updates:
                self._record(update)
            self.updates += len(updates)
            return len(updates)

    def _record(self, update: BufferedMetricUpdate) -> None:
        instrument = self._instruments.get(id(update.metric))
        if instrument is None:
            instrument = self._instruments[id(update.metric)] = self._instrument(update.metric)
        # The SDK hands out the same attribute object for the same set: convert each once.
        attributes = self._attributes.get(id(update.attributes))
        if attributes is None:
            attributes = self._attributes[id(update.attributes)] = dict(update.attributes)
        if isinstance(instrument, Counter):
            instrument.add(update.value, attributes)
        elif isinstance(instrument, Histogram):
            instrument.record(update.value, attributes)
        else:
            instrument.set(update.value, attributes)

    def _instrument(self, metric: BufferedMetric) -> Instrument:
        # Durations come as seconds (MetricBufferDurationFormat.SECONDS), whatever unit Core names.
        unit = "s" if metric.unit in ("duration", "ms", "s") else (metric.unit or "")
        description = metric.description or ""
        if metric.kind == BUFFERED_METRIC_KIND_COUNTER:
            return self.meter.create_counter(metric.name, unit=unit, description=description)
        if metric.kind == BUFFERED_METRIC_KIND_GAUGE:
            return self.meter.create_gauge(metric.name, unit=unit, description=description)
        return self.meter.create_histogram(metric.name, unit=unit, description=description)

    async def drain_forever(self, interval_s: float = DRAIN_INTERVAL_S) -> None:
        """Drain every ``interval_s`` until cancelled (one last drain then)."""
        try:
            while True:
                await asyncio.sleep(interval_s)
                self._drain_logged()
        finally:
            with contextlib.suppress(Exception):
                self.drain()

    def _drain_logged(self) -> None:
        try:
            self.drain()
        except Exception:  # a metric problem must never stop the process it measures
            log.exception("draining Temporal SDK metrics failed")
