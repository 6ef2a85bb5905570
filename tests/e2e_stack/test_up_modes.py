"""`podmedic up` runs the placement webhook as production does, and serves the simulator's
device-plugin and CDI modes; `podmedic demo` shows a JobSet rank held on its node.

Real parts: every child is its own process (the Temporal dev server, the simulator, `podmedic
admission`, the worker, the ingest, the node agent); the webhook is called by the simulator's API
server over TLS with the CA the webhook wrote into its configuration, as kube-apiserver calls a
webhook (podmedic_sim/admission.py cites its source). The configuration is the one deploy/
registers (tests/deploy/test_manifests.py compares them). The device-plugin capacity and the CDI
resource IDs follow the kubelet (podmedic_sim/kubelet_status.py cites pkg/kubelet/cm/dra/manager.go).
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_kubectl, wait_until
from workers.stack.placement_webhook import CONFIGURATION
from workers.stack.up import Stack, StackOptions


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options = StackOptions(state_dir=tmp_path_factory.mktemp("up-modes"), nodes=2, devices_per_node=2,
                           device_plugins={"example.com/gpu": 2}, cdi_ids="shared")
    with Stack(options) as running:
        yield running


def _kubectl_json(stack: Stack, *args: str) -> Any:
    done = run_kubectl(str(stack.endpoints["kubeconfig"]), *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _webhook_stats(stack: Stack) -> dict[str, Any]:
    """``GET /v1/stats`` of the webhook, trusting only the CA it wrote into its configuration."""
    hook = _kubectl_json(stack, "get", "mutatingwebhookconfiguration", CONFIGURATION)["webhooks"][0]
    assert hook["clientConfig"]["url"] == f"{stack.endpoints['admission_url']}/mutate-pods"
    context = ssl.create_default_context(cadata=base64.b64decode(hook["clientConfig"]["caBundle"]).decode())
    with urllib.request.urlopen(f"{stack.endpoints['admission_url']}/v1/stats", context=context, timeout=5) as r:
        stats: dict[str, Any] = json.loads(r.read())
    return stats


def test_up_registers_and_serves_the_placement_webhook_that_the_api_server_calls(stack: Stack) -> None:
    wait_until(lambda: _kubectl_json(stack, "get", "mutatingwebhookconfiguration", CONFIGURATION)["webhooks"][0]
               ["clientConfig"].get("caBundle"), timeout=30, what="the webhook's CA in its configuration")
    before = _webhook_stats(stack)["reviewed"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reviewed"},
           "spec": {"containers": [{"name": "c", "image": "registry.local/app:1"}]}}
    created = run_kubectl(str(stack.endpoints["kubeconfig"]), "create", "-f", "-", stdin=json.dumps(pod))
    assert created.returncode == 0, created.stderr
    assert _webhook_stats(stack)["reviewed"] == before + 1, "the API server did not call the webhook"


def test_up_serves_device_plugin_gpus_and_shared_cdi_ids(stack: Stack) -> None:
    node = _kubectl_json(stack, "get", "node", "node-0000")
    assert node["status"]["capacity"]["example.com/gpu"] == "2", node["status"]["capacity"]
    body = json.dumps({"name": "cdi", "parallelism": 1}).encode()
    request = urllib.request.Request(f"{stack.endpoints['sim_url']}/sim/v1/workloads/training", data=body,
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).close()

    def resource_ids() -> list[str] | None:
        pods = _kubectl_json(stack, "get", "pods", "-l", "batch.kubernetes.io/job-name=cdi")["items"]
        statuses = [s for p in pods for s in (p.get("status") or {}).get("containerStatuses") or []]
        ids = [r["resourceID"] for s in statuses for e in s.get("allocatedResourcesStatus") or []
               for r in e.get("resources") or []]
        return ids or None

    ids = wait_until(resource_ids, timeout=30, what="the training pod's allocatedResourcesStatus")
    assert ids == ["k8s.gpu.nvidia.com/device=all"], ids


def test_up_without_the_webhook_plans_no_admission(tmp_path: Path) -> None:
    stack = Stack(StackOptions(state_dir=tmp_path, admission=False))
    stack.ports = {name: 0 for name in ("temporal", "ui", "simulator", "vendor", "ingest", "admission")}
    roles = [child.role for child in stack._plan()]
    assert "admission" not in roles and "admission_url" not in stack.endpoints, roles
    with_webhook = Stack(StackOptions(state_dir=tmp_path))
    with_webhook.ports = stack.ports
    assert "admission" in [child.role for child in with_webhook._plan()]


def test_a_bad_device_plugin_flag_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "workers.cli.main", "up", "--state-dir", str(tmp_path),
                           "--device-plugin", "gpu=eight"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "--device-plugin 'gpu=eight': expected RESOURCE=COUNT" in done.stderr
    assert not (tmp_path / "logs").exists(), "nothing was started"


def test_the_demo_holds_a_failed_jobset_rank_on_its_node(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    done = subprocess.run([sys.executable, "-m", "workers.cli.main", "demo", "--state-dir", str(tmp_path / "demo"),
                           "--summary-json", str(summary)], capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(summary.read_text())["incidents"]
    rank = next(r for r in rows if "llm-node-" in r["recovery"])
    assert rank["recovery"].startswith("rescheduled by podmedic to the same node"), rank
    assert rank["recovery"].endswith("held there by the placement webhook"), rank
    device_node = rank["device"].split("/")[1]
    assert f" on {device_node})" in rank["recovery"], rank
    assert all(r["outcome"] != "NOT FINISHED" for r in rows), rows
