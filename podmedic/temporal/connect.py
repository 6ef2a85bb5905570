"""Connecting to Temporal with podmedic's data converter and the environment's security settings."""

from __future__ import annotations

import dataclasses
import logging

from temporalio.client import Client
from temporalio.converter import DataConverter

from podmedic.telemetry import setup as telemetry
from podmedic.temporal.converter import podmedic_data_converter
from podmedic.temporal.security import TemporalSecurity

DEFAULT_TASK_QUEUE = "podmedic"


def data_converter(security: TemporalSecurity) -> DataConverter:
    """Pydantic models as JSON, sealed by the payload codec when a key is configured."""
    if security.codec is None:
        return podmedic_data_converter
    return dataclasses.replace(podmedic_data_converter, payload_codec=security.codec)


async def connect(address: str, namespace: str = "default", security: TemporalSecurity | None = None) -> Client:
    """A client that speaks podmedic's pydantic models; TLS, API key and codec from the environment
    unless ``security`` is given (see ``podmedic/temporal/security.py``)."""
    security = TemporalSecurity.from_env() if security is None else security
    logging.getLogger("podmedic.temporal").info("connecting to %s namespace %s: %s", address, namespace,
                                                security.describe())
    # With telemetry installed (``podmedic.telemetry.install``), the client carries its tracing and
    # metrics interceptors (the worker inherits them) and runs on its Runtime (Temporal SDK metrics).
    installed = telemetry.current()
    return await Client.connect(address, namespace=namespace, data_converter=data_converter(security),
                                tls=security.tls, api_key=security.api_key,
                                interceptors=installed.client_interceptors() if installed else [],
                                runtime=installed.runtime if installed else None)
