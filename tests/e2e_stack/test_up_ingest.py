"""`podmedic up` as separate processes: the ingest's HTTP front, its token, a SIGKILLed ingest
restarted by the supervisor without losing what it had answered 202 for, and the node agent that
sees a GPU no pod holds."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError

from podmedic.domain.incident import IncidentState
from podmedic.domain.models import FailureMode
from podmedic.temporal.connect import connect
from tests.helpers import assert_eventually, wait_until
from workers.stack.up import Stack, StackOptions
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(StackOptions(state_dir=tmp_path_factory.mktemp("up"), nodes=2, devices_per_node=2)) as running:
        yield running


def _post(url: str, body: Any, token: str | None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/cloudevents+json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def _cloudevent(device: str, code: int) -> dict[str, Any]:
    return {"specversion": "1.0", "id": f"ev-{device}-{code}", "source": "tests/up",
            "type": "io.podmedic.device.health.v1", "time": dt.datetime.now(dt.UTC).isoformat(),
            "data": {"driver": "gpu.nvidia.com", "pool": "node-0001", "device": device, "node": "node-0001",
                     "health": "Unhealthy", "code": code, "message": f"XID {code}"}}


def _fail_idle_gpu(ep: dict[str, Any], device: str) -> None:
    """XID 79 on a GPU of node-0000 that no pod holds (only the node agent can see it)."""
    body = {"driver": "gpu.nvidia.com", "pool": "node-0000", "device": device, "health": "Unhealthy",
            "reason": "XidError", "code": 79, "message": "XID 79: GPU has fallen off the bus"}
    req = urllib.request.Request(f"{ep['sim_url']}/sim/v1/faults/device", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


async def _incident_state(ep: dict[str, Any], device: str, check: Callable[[IncidentState], None],
                          timeout: float) -> IncidentState:
    """The incident of node-0000's ``device`` once it exists and passes ``check``."""
    client = await connect(str(ep["temporal_address"]))
    handle = client.get_workflow_handle(f"device/gpu.nvidia.com/node-0000/{device}")

    async def passed() -> IncidentState:
        try:
            state = await handle.query(DeviceIncidentWorkflow.get_state)
        except RPCError as err:
            raise AssertionError(f"no incident yet: {err}") from None
        check(state)
        return state

    return await assert_eventually(passed, timeout=timeout)


async def _failure_mode(stack: Stack, device: str) -> FailureMode | None:
    client = await connect(str(stack.endpoints["temporal_address"]))
    handle = client.get_workflow_handle(f"device/gpu.nvidia.com/node-0001/{device}")

    async def classified() -> IncidentState:
        state = await handle.query(DeviceIncidentWorkflow.get_state)
        assert state.failure_mode is not None
        return state

    return (await assert_eventually(classified, timeout=60)).failure_mode


async def test_up_serves_ingest_with_a_token_and_survives_an_ingest_kill(stack: Stack) -> None:
    ep = stack.endpoints
    url = f"{ep['ingest_url']}/v1/events"
    token = Path(str(ep["ingest_token_file"])).read_text().strip()
    assert Path(str(ep["ingest_token_file"])).stat().st_mode & 0o077 == 0  # owner-only

    status, body = _post(url, _cloudevent("gpu-0", 79), token=None)
    assert status == 401, body
    status, body = _post(url, _cloudevent("gpu-0", 79), token="wrong")
    assert status == 401, body

    status, body = _post(url, _cloudevent("gpu-0", 79), token=token)
    assert status == 202, body
    assert body["incidents"] == ["device/gpu.nvidia.com/node-0001/gpu-0"]
    assert await _failure_mode(stack, "gpu-0") is FailureMode.DEVICE_FAILED

    ingest = next(c for c in stack.children if c.role == "ingest")
    assert ingest.proc is not None
    os.kill(ingest.proc.pid, signal.SIGKILL)
    wait_until(lambda: ingest.restarts >= 1, timeout=30, what="the supervisor to restart ingest")

    def answered() -> tuple[int, dict[str, Any]] | None:
        try:
            return _post(url, _cloudevent("gpu-1", 13), token=token)
        except OSError:
            return None

    status, body = await asyncio.to_thread(wait_until, answered, timeout=60, interval=0.5, what="ingest back")
    assert status == 202, body
    assert await _failure_mode(stack, "gpu-1") is FailureMode.CONTAINER_CODE


async def test_up_runs_the_node_agent_so_an_idle_gpu_that_fails_is_quarantined(stack: Stack) -> None:
    """No pod holds the GPU, so no pod status ever names it (KEP-4680 reports allocated devices only):
    the node agent, reading the simulator's NVML view, is what sees its XID."""
    ep = stack.endpoints
    _fail_idle_gpu(ep, "gpu-1")

    def tainted(state: IncidentState) -> None:
        assert state.taint_rule is not None and state.failure_mode is FailureMode.DEVICE_FAILED

    state = await _incident_state(ep, "gpu-1", tainted, timeout=60)
    assert not state.pods
    assert any(t.message.startswith("http: Unhealthy xid XID 79") for t in state.timeline), state.timeline
    with urllib.request.urlopen(f"{ep['sim_url']}/sim/v1/state", timeout=10) as resp:
        device = next(d for d in json.loads(resp.read())["devices"]
                      if (d["pool"], d["device"]) == ("node-0000", "gpu-1"))
    assert device["allocated_to"] is None and device["taints"], device


async def test_an_ingest_killed_with_reports_in_hand_and_undelivered_loses_none(stack: Stack) -> None:
    """Temporal is stopped (SIGSTOP), so the node agent's report of a failed idle GPU reaches the ingest
    and cannot be delivered (``in_flight`` in ``/v1/stats``); the ingest is SIGKILLed then. It never
    answered 202, so the agent keeps the report and sends it again to the restarted ingest: the
    incident opens. Runs last in the module: it stops Temporal for a while."""
    ep = stack.endpoints
    token = Path(str(ep["ingest_token_file"])).read_text().strip()

    def stats() -> dict[str, Any]:
        req = urllib.request.Request(f"{ep['ingest_url']}/v1/stats", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            found: dict[str, Any] = json.loads(resp.read())
            return found

    temporal, ingest = stack.child("temporal"), stack.child("ingest")
    assert temporal.proc is not None and ingest.proc is not None
    restarts = ingest.restarts
    os.kill(temporal.proc.pid, signal.SIGSTOP)
    try:
        _fail_idle_gpu(ep, "gpu-0")
        in_hand = await asyncio.to_thread(wait_until, lambda: stats()["in_flight"] >= 1, timeout=60, interval=0.1,
                                          what="the agent's report in the ingest's hands, undelivered")
        assert in_hand
        os.kill(ingest.proc.pid, signal.SIGKILL)
    finally:
        os.kill(temporal.proc.pid, signal.SIGCONT)
    wait_until(lambda: ingest.restarts > restarts, timeout=30, what="the supervisor to restart ingest")

    def opened(state: IncidentState) -> None:
        assert state.failure_mode is FailureMode.DEVICE_FAILED

    await _incident_state(ep, "gpu-0", opened, timeout=120)
