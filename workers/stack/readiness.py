"""How ``podmedic up`` learns that a child is ready, or why it never will be.

Ports are picked free and handed to each child, which binds them a moment later; a child that
exits before it answers ends the wait at once, with the tail of its log in one line.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path

__all__ = ["PORT_TAKEN", "StackError", "free_port", "log_tail", "wait_ready"]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


PORT_TAKEN = ("address already in use", "bind: address", "errno 98")
"""How the children say their port was taken between ``free_port`` and their bind (Go, Python)."""


class StackError(Exception):
    """A child could not start; the message is one line naming it, with the tail of its log."""

    def __init__(self, message: str, *, port_taken: bool = False) -> None:
        super().__init__(message)
        self.port_taken = port_taken


def log_tail(path: Path, lines: int = 5) -> str:
    """The last ``lines`` non-empty lines of a log, joined with `` | `` (for a one-line message)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty log)"


def wait_ready(check: str, deadline_s: float, what: str, proc: subprocess.Popen[bytes] | None = None,
               log_path: Path | None = None) -> None:
    """Wait until ``check`` (``tcp:host:port`` or an http URL) answers; a ``proc`` that exits first
    ends the wait at once with a ``StackError`` carrying the tail of ``log_path``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            tail = log_tail(log_path) if log_path else ""
            raise StackError(f"{what} exited with code {proc.returncode} before it was ready: {tail}",
                             port_taken=any(t in tail.lower() for t in PORT_TAKEN))
        try:
            if check.startswith("tcp:"):
                _, host, port = check.split(":")
                with socket.create_connection((host, int(port)), timeout=1):
                    return
            else:
                with urllib.request.urlopen(check, timeout=1):
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not become ready within {deadline_s:g}s ({check})")
