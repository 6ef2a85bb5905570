"""Fixtures of the agent tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.agent.fakes import IngestStub


@pytest_asyncio.fixture
async def ingest() -> AsyncIterator[IngestStub]:
    """A stub ingest server on a free local port."""
    stub = IngestStub()
    await stub.start()
    yield stub
    await stub.stop()
