"""The kubelet checkpoint API and the pod proxy as podmedic reaches them: the real kubernetes
client's connection settings (``LoopCalls.proxy_post``) and the method runners against the simulator."""

from __future__ import annotations

import json
import time

import pytest

from activities.checkpoints.methods import MethodRunner
from activities.checkpoints.spec import MethodSpec
from podmedic.domain.models import PodRef
from podmedic.domain.steps import CheckpointStatus
from tests.e2e_checkpoint.conftest import Stack, annotate, start_job

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _ref(pod: dict[str, object], checkpoint_id: str | None = None) -> PodRef:
    return PodRef(namespace=str(pod["namespace"]), name=str(pod["name"]), uid=str(pod["uid"]),
                  node=str(pod["node"]), last_checkpoint_id=checkpoint_id)


def _runner(stack: Stack, timeout_s: float = 2.0) -> MethodRunner:
    return MethodRunner(stack.kube.aio, "req-proxy", "device/test", time.monotonic() + timeout_s, 0.1)


async def test_kubelet_404_for_unknown_pod_container_and_node(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="kubelet")
    node, post = pod["node"], stack.kube.aio.proxy_post
    status, text = await post(f"/api/v1/nodes/{node}/proxy/checkpoint/default/ghost/trainer", None, timeout_s=5)
    assert (status, text) == (404, 'pod does not exist: "default/ghost"\n')
    status, text = await post(f"/api/v1/nodes/{node}/proxy/checkpoint/default/{pod['name']}/ghost", None, timeout_s=5)
    assert (status, text) == (404, 'container does not exist: "ghost"\n')
    status, text = await post("/api/v1/nodes/node-9999/proxy/checkpoint/default/x/y", None, timeout_s=5)
    assert status == 404 and json.loads(text)["reason"] == "NotFound"
    other = "node-0000" if node != "node-0000" else "node-0001"  # the pod's kubelet is elsewhere
    result = await _runner(stack).kubelet(_ref(pod, "own-1"), MethodSpec("kubelet", containers=("trainer",)), other)
    assert result.status is CheckpointStatus.FAILED and "kubelet answered 404" in result.reason
    assert result.checkpoint_id == "own-1"  # the last known checkpoint is kept
    result = await _runner(stack).kubelet(_ref(pod), MethodSpec("kubelet", containers=("trainer",)), node)
    assert result.status is CheckpointStatus.SAVED and result.locations[0].endswith(".tar")


async def test_pod_proxy_errors(stack: Stack) -> None:
    [pod] = start_job(stack.sim, checkpoint_method="http")
    post = stack.kube.aio.proxy_post
    status, text = await post("/api/v1/namespaces/default/pods/ghost:8471/proxy/podmedic/checkpoint",
                              {"request_id": "r"}, timeout_s=5)
    assert status == 404 and json.loads(text)["reason"] == "NotFound"
    base = f"/api/v1/namespaces/default/pods/{pod['name']}"
    status, text = await post(f"{base}:8471/proxy/elsewhere", {"request_id": "r"}, timeout_s=5)
    assert status == 404 and "no handler" in text
    status, text = await post(f"{base}:8471/proxy/podmedic/checkpoint", {}, timeout_s=5)
    assert status == 400 and "request_id" in text
    # Nothing listens on another port: refused until the deadline, then a timeout naming why.
    annotate(stack.sim, pod, **{"podmedic.io/checkpoint-port": "9000"})
    result = await _runner(stack, 1.0).http(_ref(pod), MethodSpec("http", port=8471))
    assert result.status is CheckpointStatus.TIMED_OUT and "connection refused" in result.reason, result
