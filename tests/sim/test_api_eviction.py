"""The eviction subresource against PodDisruptionBudgets, read from the status the disruption controller writes.

Sources: kubernetes/kubernetes ``pkg/registry/core/pod/storage/eviction.go`` (``canIgnorePDB``,
``checkAndDecrement``, ``createTooManyRequestsError``) and ``pkg/controller/disruption/disruption.go``.
"""

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


def _synced(pol: client.PolicyV1Api, ns: str, name: str, **expect: int) -> client.V1PodDisruptionBudget:
    """The PDB once the disruption controller has synced its spec and its status reads ``expect``."""
    deadline = time.monotonic() + 5
    while True:
        pdb = pol.read_namespaced_pod_disruption_budget(name, ns)
        status = pdb.status
        if status is not None and (status.observed_generation or 0) >= pdb.metadata.generation and all(
                getattr(status, field) == value for field, value in expect.items()):
            return pdb
        assert time.monotonic() < deadline, f"PDB {name} never read {expect}: {status}"
        time.sleep(0.05)


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
    _synced(pol, ns, "train", disruptions_allowed=1, current_healthy=2, desired_healthy=1, expected_pods=2)
    return ns


def test_eviction_allowed_then_blocked(api: client.ApiClient, guarded: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod_eviction("w-0", guarded, _eviction("w-0", guarded))
    assert _gone_or_terminating(v1, "w-0", guarded)
    _synced(client.PolicyV1Api(api), guarded, "train", current_healthy=1, disruptions_allowed=0)
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


def test_an_eviction_takes_its_disruption_before_the_pod_is_gone(api: client.ApiClient, guarded: str) -> None:
    """checkAndDecrement: the budget is spent at the eviction (disruptedPods), so a second one at once is
    refused even while the first pod is still Terminating and counted by nobody else."""
    v1, pol = client.CoreV1Api(api), client.PolicyV1Api(api)
    v1.create_namespaced_pod_eviction("w-0", guarded, _eviction("w-0", guarded))
    spent = pol.read_namespaced_pod_disruption_budget("train", guarded).status
    assert spent.disruptions_allowed == 0 and "w-0" in (spent.disrupted_pods or {})
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_pod_eviction("w-1", guarded, _eviction("w-1", guarded))
    assert err.value.status == 429 and "Retry-After" not in (err.value.headers or {})


def test_a_pending_pod_is_evicted_whatever_its_budget(api: client.ApiClient, ns: str) -> None:
    v1, pol = client.CoreV1Api(api), client.PolicyV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("waiting", {"app": "held"}))
    pol.create_namespaced_pod_disruption_budget(ns, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "held"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "held"}}}})
    v1.create_namespaced_pod_eviction("waiting", ns, _eviction("waiting", ns))
    assert _gone_or_terminating(v1, "waiting", ns)
