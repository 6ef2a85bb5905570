"""An eviction deletes through the pod's store with its ``deleteOptions``, preconditions included.

Source: kubernetes/kubernetes ``pkg/registry/core/pod/storage/eviction.go`` (the eviction's
``deleteOptions`` are passed to the pod's deletion) and k8s.io/apiserver ``pkg/storage/interfaces.go``
``Preconditions.Check`` with ``pkg/registry/generic/registry/store.go``: a UID or resourceVersion that
does not match the stored pod is 409 Conflict, and nothing is evicted. This is what tells podmedic that
a pod it meant to evict was replaced under the same name (a StatefulSet's or a LeaderWorkerSet's pod).
"""

from __future__ import annotations

from kubernetes import client

from tests.sim.conftest import pod_manifest


def _evict(v1: client.CoreV1Api, ns: str, name: str, uid: str) -> None:
    v1.create_namespaced_pod_eviction(name, ns, {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns},
        "deleteOptions": {"preconditions": {"uid": uid}}})


def test_an_eviction_naming_another_uid_is_a_conflict_and_evicts_nothing(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    pod = v1.create_namespaced_pod(ns, pod_manifest("replaced"))
    try:
        _evict(v1, ns, "replaced", "00000000-0000-0000-0000-000000000000")
    except client.ApiException as refused:
        assert refused.status == 409 and "Precondition failed: UID in precondition" in refused.body
    else:
        raise AssertionError("an eviction with another pod's UID was accepted")
    still = v1.read_namespaced_pod("replaced", ns)
    assert still.metadata.uid == pod.metadata.uid and still.metadata.deletion_timestamp is None


def test_an_eviction_naming_the_pods_uid_evicts_it(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    pod = v1.create_namespaced_pod(ns, pod_manifest("evicted"))
    _evict(v1, ns, "evicted", pod.metadata.uid)
    try:
        gone = v1.read_namespaced_pod("evicted", ns)
    except client.ApiException as missing:
        assert missing.status == 404
    else:
        assert gone.metadata.deletion_timestamp is not None
