"""Shared fixtures of the simulator tests: one simulator per test module, clients, raw HTTP."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from podmedic_sim import SimCluster, SimConfig
from podmedic_sim.audit import ENV
from tests.simkit import serving, unmodified_client

Raw = Callable[..., tuple[int, Any]]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A small simulator serving on a free port, shared by one test module."""
    # PODMEDIC_SIM_API_ONLY=1 runs these tests against the API server without behaviours.
    api_only = os.environ.get("PODMEDIC_SIM_API_ONLY") == "1"
    cluster = SimCluster(
        SimConfig(nodes=2, devices_per_node=2), bookmark_interval_s=0.2, api_only=api_only
    )
    yield from serving(cluster, tmp_path_factory.mktemp("sim") / "kubeconfig")


@pytest.fixture(scope="module")
def unaudited_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A simulator without the RBAC recorder (tests/deploy/test_rbac_proof.py), for a module whose own
    gateways speak as a podmedic component: what they call must count toward no component's role."""
    saved = os.environ.pop(ENV, None)
    cluster = SimCluster(SimConfig(nodes=2, devices_per_node=2), bookmark_interval_s=0.2)
    try:
        cluster.start(kubeconfig_path=tmp_path_factory.mktemp("sim") / "kubeconfig")
    finally:
        if saved is not None:
            os.environ[ENV] = saved
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    """An unmodified ``kubernetes`` ApiClient configured from the simulator's kubeconfig."""
    yield from unmodified_client(sim)


@pytest.fixture
def ns(api: client.ApiClient) -> str:
    """A fresh namespace for one test."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


@pytest.fixture(scope="module")
def raw(sim: SimCluster) -> Raw:
    """Send a raw HTTP request: ``raw(method, path, body=None, ctype=...) -> (status, json)``."""

    def send(
        method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            sim.url + path, data=data, method=method, headers={"Content-Type": ctype}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, text = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, text = err.code, err.read()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text.decode(errors="replace")

    return send


def pod_manifest(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A minimal valid pod that no simulated scheduler or kubelet manages (ghost node)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeName": "ghost-node",
            "schedulerName": "podmedic-test-none",
            "containers": [{"name": "c", "image": "registry.local/app:1"}],
            **spec,
        },
    }


def kubeconfig_of(sim: SimCluster) -> Path:
    """The simulator's kubeconfig path (asserting it exists)."""
    assert sim.kubeconfig_path is not None
    return sim.kubeconfig_path
