"""Connecting to Temporal with podmedic's data converter and the environment's security settings."""

from __future__ import annotations

import dataclasses
import logging

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from workers.security import TemporalSecurity

DEFAULT_TASK_QUEUE = "podmedic"


def data_converter(security: TemporalSecurity) -> DataConverter:
    """Pydantic models as JSON, sealed by the payload codec when a key is configured."""
    if security.codec is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=security.codec)


async def connect(address: str, namespace: str = "default", security: TemporalSecurity | None = None) -> Client:
    """A client that speaks podmedic's pydantic models; TLS, API key and codec from the environment
    unless ``security`` is given (see ``workers/security.py``)."""
    security = TemporalSecurity.from_env() if security is None else security
    logging.getLogger("podmedic.temporal").info("connecting to %s namespace %s: %s", address, namespace,
                                                security.describe())
    return await Client.connect(address, namespace=namespace, data_converter=data_converter(security),
                                tls=security.tls, api_key=security.api_key)
