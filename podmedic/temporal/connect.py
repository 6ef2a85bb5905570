"""Connecting to Temporal with podmedic's data converter and the environment's security settings."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from temporalio.client import Client
from temporalio.converter import DataConverter

from podmedic.settings.groups import DEFAULT_TASK_QUEUE
from podmedic.telemetry import setup as telemetry
from podmedic.temporal.converter import podmedic_data_converter
from podmedic.temporal.security import TemporalSecurity

__all__ = ["DEFAULT_TASK_QUEUE", "TemporalUnreachable", "connect", "connect_patiently", "data_converter"]


def data_converter(security: TemporalSecurity) -> DataConverter:
    """Pydantic models as JSON, sealed by the payload codec when a key is configured."""
    if security.codec is None:
        return podmedic_data_converter
    return dataclasses.replace(podmedic_data_converter, payload_codec=security.codec)


async def connect(address: str, namespace: str = "default", security: TemporalSecurity | None = None,
                  *, announce: bool = True) -> Client:
    """A client that speaks podmedic's pydantic models; TLS, API key and codec from the environment
    unless ``security`` is given (see ``podmedic/temporal/security.py``); ``announce`` logs where to."""
    security = TemporalSecurity.from_env() if security is None else security
    if announce:
        logging.getLogger("podmedic.temporal").info("connecting to %s namespace %s: %s", address, namespace,
                                                    security.describe())
    # With telemetry installed (``podmedic.telemetry.install``), the client carries its tracing and
    # metrics interceptors (the worker inherits them) and runs on its Runtime (Temporal SDK metrics).
    installed = telemetry.current()
    return await Client.connect(address, namespace=namespace, data_converter=data_converter(security),
                                tls=security.tls, api_key=security.api_key,
                                interceptors=installed.client_interceptors() if installed else [],
                                runtime=installed.runtime if installed else None)


class TemporalUnreachable(Exception):
    """Temporal did not answer within the wait; the message names the address and the last error."""


async def connect_patiently(address: str, namespace: str = "default", wait_s: float = 60.0,
                            security: TemporalSecurity | None = None) -> Client:
    """``connect``, tried again with back-off (1 s doubling to 15 s) while Temporal does not answer,
    for up to ``wait_s``: a worker started beside its server, or during the server's restart, waits
    for it instead of dying. Each failed try is one warning line.

    Raises:
        TemporalUnreachable: still no answer after ``wait_s`` (the message says where and why).
    """
    log = logging.getLogger("podmedic.temporal")
    deadline = time.monotonic() + wait_s
    gap = 1.0
    first = True
    while True:
        try:
            return await connect(address, namespace, security, announce=first)
        except RuntimeError as exc:  # the SDK's bridge reports connect failures as RuntimeError
            why = connect_failure(exc)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TemporalUnreachable(f"cannot reach Temporal at {address} (namespace {namespace}) within "
                                          f"{wait_s:g}s: {why}") from None
            log.warning("Temporal at %s not reachable (%s); trying again in %.0fs", address, why, min(gap, left))
            first = False
            await asyncio.sleep(min(gap, left))
            gap = min(gap * 2, 15.0)


def connect_failure(exc: BaseException) -> str:
    """The useful part of a bridge error: "Failed client connect: ... ConnectionRefused ..." shortened."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    for marker in ("Connection refused", "ConnectionRefused", "dns error", "timed out", "certificate"):
        if marker.lower() in text.lower():
            return marker.replace("ConnectionRefused", "connection refused").lower()
    return text[:200]
