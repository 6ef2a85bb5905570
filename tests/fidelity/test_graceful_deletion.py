"""A DELETE of a running pod is graceful: the pod stays, Terminating, until the kubelet removes it.

Sources: kubernetes/kubernetes ``pkg/registry/core/pod/strategy.go`` (``CheckGracefulDelete``: the
request's ``gracePeriodSeconds``, else the pod's ``terminationGracePeriodSeconds``, defaulted to 30 by
``pkg/apis/core/v1/defaults.go``; 0 for a pod bound to no node or already terminal) and k8s.io/apiserver
``pkg/registry/rest/delete.go`` (``BeforeDelete``: ``deletionTimestamp`` and ``deletionGracePeriodSeconds``
set, the object kept; a later DELETE may only shorten the period; 0 deletes at once). The kubelet sends
SIGTERM and deletes the pod once its containers stopped (``pkg/kubelet/status/status_manager.go``).
A watch opened before the DELETE sees each step in order, so the test does not race the kubelet.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client, watch

from tests.sim.conftest import pod_manifest


def _events(v1: client.CoreV1Api, ns: str, name: str, since: str) -> list[tuple[str, Any]]:
    """The watch events of pod ``name`` from ``since`` until it is deleted."""
    seen: list[tuple[str, Any]] = []
    for ev in watch.Watch().stream(v1.list_namespaced_pod, ns, resource_version=since, timeout_seconds=30,
                                   field_selector=f"metadata.name={name}"):
        seen.append((ev["type"], ev["object"]))
        if ev["type"] == "DELETED":
            break
    return seen


def _running_pod(v1: client.CoreV1Api, ns: str, name: str) -> str:
    """A pod the simulated kubelet of node-0000 runs; its resourceVersion once Running."""
    manifest = pod_manifest(name, nodeName="node-0000")
    del manifest["spec"]["schedulerName"]
    created = v1.create_namespaced_pod(ns, manifest)
    for ev in watch.Watch().stream(v1.list_namespaced_pod, ns, resource_version=created.metadata.resource_version,
                                   field_selector=f"metadata.name={name}", timeout_seconds=30):
        if ev["object"].status.phase == "Running":
            return str(ev["object"].metadata.resource_version)
    raise AssertionError(f"pod {name} never Running")


def test_a_running_pod_is_terminating_for_its_grace_period_before_it_goes(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    since = _running_pod(v1, ns, "graceful")
    answer = v1.delete_namespaced_pod("graceful", ns)
    assert answer.metadata.deletion_timestamp is not None and answer.metadata.deletion_grace_period_seconds == 30
    kinds = [(t, o.metadata.deletion_timestamp is not None) for t, o in _events(v1, ns, "graceful", since)]
    assert ("MODIFIED", True) in kinds and kinds[-1][0] == "DELETED"
    assert kinds.index(("MODIFIED", True)) < len(kinds) - 1, "Terminating is seen before the pod goes"


def test_a_second_delete_only_shortens_and_zero_deletes_at_once(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    manifest = pod_manifest("kept", terminationGracePeriodSeconds=60)
    manifest["metadata"]["finalizers"] = ["fidelity.podmedic.io/hold"]  # the pod stays while the test looks
    v1.create_namespaced_pod(ns, manifest)
    first = v1.delete_namespaced_pod("kept", ns, grace_period_seconds=45)
    longer = v1.delete_namespaced_pod("kept", ns, grace_period_seconds=50)
    assert first.metadata.deletion_grace_period_seconds == 45 == longer.metadata.deletion_grace_period_seconds
    assert v1.delete_namespaced_pod("kept", ns, grace_period_seconds=0).metadata.deletion_grace_period_seconds == 0
    v1.patch_namespaced_pod("kept", ns, {"metadata": {"finalizers": None}})
    assert not [p for p in v1.list_namespaced_pod(ns).items if p.metadata.name == "kept"]


def test_a_pod_bound_to_no_node_is_deleted_at_once(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    manifest = pod_manifest("unbound")
    del manifest["spec"]["nodeName"]  # and no scheduler serves its schedulerName: it stays unbound
    v1.create_namespaced_pod(ns, manifest)
    v1.delete_namespaced_pod("unbound", ns)
    assert not [p for p in v1.list_namespaced_pod(ns).items if p.metadata.name == "unbound"]
