"""``kubectl exec`` over the WebSocket protocol kubectl speaks, and nothing run when the upgrade fails.

kubectl 1.30+ opens exec as a WebSocket offering ``v5.channel.k8s.io`` (k8s.io/client-go
``tools/remotecommand/websocket.go``) and falls back to SPDY only when that upgrade fails; the API
server runs the command only on a stream it has agreed (k8s.io/apiserver ``pkg/util/wsstream``,
``k8s.io/kubelet/pkg/cri/streaming``). The simulated containers run only ``kill`` (podmedic_sim/exec_ws.py),
so these tests need the simulator.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from kubernetes import client

from podmedic_sim import SimCluster
from tests.fidelity.conftest import Kubectl, needs_simulator
from tests.sim.conftest import pod_manifest


def _ready_pod(api: client.ApiClient, ns: str, name: str, kubectl: Kubectl) -> None:
    manifest = pod_manifest(name, nodeName="node-0000")
    del manifest["spec"]["schedulerName"]
    client.CoreV1Api(api).create_namespaced_pod(ns, manifest)
    kubectl("wait", "--for=condition=Ready", f"pod/{name}", "-n", ns, "--timeout=30s", check=True, timeout=45)


def _restarts(kubectl: Kubectl, ns: str, name: str) -> int:
    pod = json.loads(kubectl("get", "pod", name, "-n", ns, "-o", "json", check=True).stdout)
    return int(pod["status"]["containerStatuses"][0]["restartCount"])


def test_kubectl_exec_kill_restarts_the_container_once(sim: SimCluster | None, api: client.ApiClient, ns: str,
                                                       kubectl: Kubectl) -> None:
    needs_simulator(sim)
    _ready_pod(api, ns, "killed", kubectl)
    done = kubectl("exec", "killed", "-n", ns, "--", "kill", "1")
    assert done.returncode == 0, done.stderr
    kubectl("wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/killed", "-n", ns,
            "--timeout=30s", check=True, timeout=45)
    missing = kubectl("exec", "killed", "-n", ns, "--", "echo", "hi")
    assert missing.returncode == 127 and "command terminated with exit code 127" in missing.stderr


def test_an_exec_whose_upgrade_fails_runs_nothing(sim: SimCluster | None, api: client.ApiClient, ns: str,
                                                  kubectl: Kubectl) -> None:
    cluster = needs_simulator(sim)
    _ready_pod(api, ns, "spared", kubectl)

    async def offer(protocol: str) -> None:
        url = f"{cluster.url}/api/v1/namespaces/{ns}/pods/spared/exec?command=kill&command=1&stderr=true"
        async with aiohttp.ClientSession() as http, http.ws_connect(url, protocols=(protocol,)):
            pass

    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        asyncio.run(offer("v3.channel.k8s.io"))
    assert refused.value.status == 400
    assert _restarts(kubectl, ns, "spared") == 0, "the refused exec killed the container anyway"
