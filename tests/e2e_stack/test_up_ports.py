"""`podmedic up` when a port is taken between picking it and the child binding it.

The race is real: ``free_port`` closes the port it found, and any process may bind it before the
child does (here, a socket the test holds). The child then exits with the system's "address already
in use"; ``up`` must notice the exit at once, pick new ports for that child, give the children after
it the new address, and go on. A child that cannot start at all ends ``up`` with one line naming it
and quoting its log, and leaves no child running.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workers.stack import readiness, up
from workers.stack.readiness import StackError
from workers.stack.up import PORT_RETRIES, PORTS, Stack, StackOptions


@pytest.fixture
def taken_port() -> Iterator[int]:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    yield int(blocker.getsockname()[1])
    blocker.close()


def _picker(taken: int, role: str, times: int) -> Callable[[], int]:
    """``free_port`` that answers ``taken`` for ``role``'s first ``times`` picks (the others are real)."""
    calls = {"n": 0}
    position = PORTS.index(role)

    def pick() -> int:
        calls["n"] += 1
        first_round = calls["n"] <= len(PORTS)
        if (first_round and calls["n"] - 1 == position) or (not first_round and calls["n"] - len(PORTS) < times):
            return taken
        return readiness.free_port()
    return pick


def test_a_port_taken_before_the_child_binds_it_gets_a_new_one(tmp_path: Path, taken_port: int,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(up, "free_port", _picker(taken_port, "simulator", 1))
    caplog.set_level(logging.WARNING, logger="podmedic.up")
    with Stack(StackOptions(state_dir=tmp_path, nodes=1, devices_per_node=2)) as stack:
        port = stack.ports["simulator"]
        assert port != taken_port and stack.endpoints["sim_url"] == f"http://127.0.0.1:{port}"
        assert all(c.proc is not None and c.proc.poll() is None for c in stack.children)
        assert f"http://127.0.0.1:{port}" in " ".join(stack.child("vendor").argv)  # later children: new address
    assert f"simulator: port {taken_port} was taken before it could bind" in caplog.text
    assert "address already in use" in (tmp_path / "logs" / "simulator.log").read_text().lower()


def test_a_child_that_cannot_start_ends_up_in_one_line_and_orphans_nothing(tmp_path: Path, taken_port: int,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(up, "free_port", _picker(taken_port, "simulator", PORT_RETRIES + 1))
    stack = Stack(StackOptions(state_dir=tmp_path, nodes=1, devices_per_node=2))
    with pytest.raises(StackError) as caught:
        stack.start()
    message = str(caught.value)
    assert message.startswith("simulator exited with code ") and "before it was ready" in message, message
    assert "address already in use" in message.lower() and "\n" not in message
    assert all(c.proc is None or c.proc.poll() is not None for c in stack.children)
