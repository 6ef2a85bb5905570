"""Connecting to Temporal with podmedic's data converter."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

DEFAULT_TASK_QUEUE = "podmedic"


async def connect(address: str, namespace: str = "default") -> Client:
    """A client that speaks podmedic's pydantic models."""
    return await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)
