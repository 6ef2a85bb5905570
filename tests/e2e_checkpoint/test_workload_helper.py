"""The podmedic.workload helper as a real process answering podmedic behind the simulator's API."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from podmedic.domain.steps import CheckpointStatus
from tests.e2e_checkpoint.conftest import Stack, incident_until_checkpointed, start_job

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]


def _spawn(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.e2e_checkpoint.workload_script", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


async def test_http_helper_answers_through_the_pod_proxy(stack: Stack, tmp_path: Path,
                                                         procs: list[subprocess.Popen[str]]) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="http", checkpoint_answer="never")
    saves = tmp_path / "saves"
    proc, port = _spawn("http", str(saves))
    procs.append(proc)
    body = json.dumps({"namespace": "default", "pod": pod["name"], "port": 8471,
                       "url": f"http://127.0.0.1:{port}"}).encode()
    req = urllib.request.Request(stack.sim.url + "/sim/v1/proxy/endpoints", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 201
    outcome, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SAVED, result
    assert (result.checkpoint_id, result.location) == ("helper-1", "file:///ckpt/helper-1")
    assert saves.read_text().splitlines() == [state.checkpoint.request_id]  # saved once
    assert outcome.checkpoint == "complete: 1/1 pods"


async def test_annotation_helper_answers_on_its_pod(stack: Stack, tmp_path: Path,
                                                    procs: list[subprocess.Popen[str]]) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="annotation", checkpoint_answer="never")
    saves = tmp_path / "saves"
    proc, ready = _spawn("annotation", str(saves), stack.sim.url, "default", pod["name"])
    procs.append(proc)
    assert ready == "ready"
    _, state = await incident_until_checkpointed(stack, pod)
    assert state.checkpoint is not None
    [result] = state.checkpoint.results
    assert result.status is CheckpointStatus.SAVED, result
    assert (result.checkpoint_id, result.location) == ("helper-1", "file:///ckpt/helper-1")
    assert saves.read_text().splitlines() == [state.checkpoint.request_id]
