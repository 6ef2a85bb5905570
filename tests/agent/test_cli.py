"""``podmedic agent nvml`` as a process: the real no-NVML path, usage errors, help."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.test_nvml_reader import _nvml_present
from workers.cli.agent import EXIT_NO_NVML, EXIT_USAGE, add_agent_parser

ROOT = Path(__file__).resolve().parents[2]


def agent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workers.cli.agent", *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=ROOT, check=False)


@pytest.mark.skipif(_nvml_present(), reason="this machine has NVML")
@pytest.mark.parametrize("args", [["nvml", "--once"], ["nvml", "--ingest-url", "http://127.0.0.1:9", "--node", "n"]])
def test_without_nvml_exits_3_with_the_message(args: list[str]) -> None:
    done = agent(*args)
    assert done.returncode == EXIT_NO_NVML == 3
    assert done.stderr.strip() == ("podmedic agent nvml: NVML is not available on this machine (libnvidia-ml.so.1 "
                                   "not found): run the agent on a GPU node with the NVIDIA driver")
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize(("args", "words"), [
    (["nvml"], "--ingest-url (or env PODMEDIC_INGEST_URL) is required unless --once"),
    (["nvml", "--once", "--interval", "0"], "--interval must be positive"),
    (["nvml", "--once", "--device-template", "gpu-{minor}"], "{minor} is not one of"),
    (["nvml", "--once", "--policy", "/nonexistent/policy.yaml"], "/nonexistent/policy.yaml"),
])
def test_usage_errors_exit_2(args: list[str], words: str) -> None:
    done = agent(*args, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == EXIT_USAGE, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


def test_help_teaches() -> None:
    done = agent("nvml", "--help")
    assert done.returncode == 0
    for words in ("--once", "XID", "ecc_correctable_per_hour", "NODE_NAME", "Exit status", "gpu.nvidia.com/<node>"):
        assert words in done.stdout


def test_plugs_into_a_command_tree() -> None:
    parser = argparse.ArgumentParser(prog="podmedic")
    add_agent_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["agent", "nvml", "--once", "--node", "gpu-node-1", "--interval", "5"])
    assert (args.command, args.agent_command, args.node, args.interval, args.once) == (
        "agent", "nvml", "gpu-node-1", 5.0, True)
    assert callable(args.func)
