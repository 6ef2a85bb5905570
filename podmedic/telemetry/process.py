"""Telemetry for ``podmedic worker`` and ``podmedic ingest``: flags, install, background tasks."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

from temporalio.client import Client

from podmedic.telemetry import Telemetry, TelemetryError, install, load_telemetry_settings


def add_telemetry_flags(p: argparse.ArgumentParser) -> None:
    """The telemetry flags of a long-running process (each also read from its environment variable)."""
    g = p.add_argument_group("telemetry (docs/observability.md)")
    g.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port at /metrics "
                                                    "(env PODMEDIC_METRICS_PORT; default: off)")
    g.add_argument("--metrics-host", help="address of the metrics endpoint (env PODMEDIC_METRICS_HOST; "
                                          "default 0.0.0.0)")
    g.add_argument("--otlp-endpoint", help="export traces and metrics by OTLP/HTTP to this base URL "
                                           "(env OTEL_EXPORTER_OTLP_ENDPOINT, e.g. http://otel-collector:4318)")
    g.add_argument("--trace-sampling-ratio", type=float, help="share of incident traces kept, 0..1 "
                                                              "(env PODMEDIC_TRACE_SAMPLING_RATIO; default 1)")


def start_telemetry(args: argparse.Namespace, role: str) -> Telemetry | None:
    """Install telemetry as the flags and environment say; ``None`` when nothing is asked for.

    Exits 2 with the field and the reason on a bad setting or a port that cannot be bound.
    """
    try:
        settings = load_telemetry_settings(
            role, prometheus_port=args.metrics_port, prometheus_host=args.metrics_host,
            otlp_endpoint=args.otlp_endpoint, sampling_ratio=args.trace_sampling_ratio)
        if not settings.metrics_enabled and not settings.tracing_enabled:
            return None
        try:
            return install(settings)
        except OSError as exc:
            raise TelemetryError(f"prometheus_port (--metrics-port / PODMEDIC_METRICS_PORT): cannot listen on "
                                 f"{settings.prometheus_host}:{settings.prometheus_port}: {exc}") from exc
    except TelemetryError as exc:
        print(f"podmedic: refusing to start: telemetry: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc


@contextlib.asynccontextmanager
async def telemetry_running(telemetry: Telemetry | None, client: Client | None = None) -> AsyncIterator[None]:
    """Drain Temporal SDK metrics and, given the worker's ``client``, count open incidents; flush at exit."""
    if telemetry is None:
        yield
        return
    telemetry.start_background()
    poller = None
    if client is not None and telemetry.meter_provider is not None:
        from podmedic.telemetry.open_incidents import OpenIncidents

        counter = OpenIncidents(client, telemetry.meter_provider.get_meter("podmedic"),
                                telemetry.settings.open_incidents_interval_s)
        poller = asyncio.get_running_loop().create_task(counter.run_forever())
    try:
        yield
    finally:
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        telemetry.shutdown()
