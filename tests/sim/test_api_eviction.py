"""The eviction subresource against PodDisruptionBudgets."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from tests.sim.conftest import pod_manifest

READY = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _eviction(name: str, ns: str) -> dict[str, object]:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns},
    }


def _gone_or_terminating(v1: client.CoreV1Api, name: str, ns: str) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            pod = v1.read_namespaced_pod(name, ns)
        except client.ApiException as err:
            return err.status == 404
        if pod.metadata.deletion_timestamp or pod.status.phase in ("Failed", "Succeeded"):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def guarded(api: client.ApiClient, ns: str) -> str:
    """Two Ready pods under a PDB with minAvailable 1."""
    v1, pol = client.CoreV1Api(api), client.PolicyV1Api(api)
    for name in ("w-0", "w-1"):
        v1.create_namespaced_pod(ns, pod_manifest(name, {"app": "train"}))
        v1.patch_namespaced_pod_status(name, ns, READY)
    pol.create_namespaced_pod_disruption_budget(
        ns,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}},
        },
    )
    return ns


def test_eviction_allowed_then_blocked(api: client.ApiClient, guarded: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod_eviction("w-0", guarded, _eviction("w-0", guarded))
    assert _gone_or_terminating(v1, "w-0", guarded)
    if any(p.metadata.name == "w-0" for p in v1.list_namespaced_pod(guarded).items):
        v1.delete_namespaced_pod("w-0", guarded)
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_pod_eviction("w-1", guarded, _eviction("w-1", guarded))
    assert err.value.status == 429
    body = json.loads(err.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "needs 1 healthy pods and has 1 currently" in body["details"]["causes"][0]["message"]
    assert v1.read_namespaced_pod("w-1", guarded).metadata.deletion_timestamp is None


def test_unready_pod_evicted_with_always_allow_policy(api: client.ApiClient, ns: str) -> None:
    v1, pol = client.CoreV1Api(api), client.PolicyV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("sick", {"app": "x"}))
    pol.create_namespaced_pod_disruption_budget(
        ns,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "x"},
            "spec": {
                "maxUnavailable": 0,
                "selector": {"matchLabels": {"app": "x"}},
                "unhealthyPodEvictionPolicy": "AlwaysAllow",
            },
        },
    )
    v1.create_namespaced_pod_eviction("sick", ns, _eviction("sick", ns))
    assert _gone_or_terminating(v1, "sick", ns)


def test_eviction_of_missing_pod_is_404(api: client.ApiClient, ns: str) -> None:
    with pytest.raises(client.ApiException) as err:
        client.CoreV1Api(api).create_namespaced_pod_eviction("nope", ns, _eviction("nope", ns))
    assert err.value.status == 404
