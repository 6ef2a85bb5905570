"""Paged lists follow the storage key, and a continue token resumes after the last key served.

Source: k8s.io/apiserver ``pkg/storage/etcd3/store.go`` (``GetList``: keys in order, ``limit`` per page,
the continue token encoding the list's resourceVersion and the key to start after, every page
answering that resourceVersion) and ``pkg/storage/continue.go`` (a token that does not decode is a
400). An object deleted between two pages therefore hides no other object.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.sim.conftest import pod_manifest


def test_a_deletion_between_pages_hides_nothing(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for name in ("a", "b", "c", "d"):
        v1.create_namespaced_pod(ns, pod_manifest(name))
    first = v1.list_namespaced_pod(ns, limit=2)
    assert [p.metadata.name for p in first.items] == ["a", "b"] and first.metadata.remaining_item_count == 2
    v1.delete_namespaced_pod("a", ns, grace_period_seconds=0)
    rest = v1.list_namespaced_pod(ns, limit=2, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["c", "d"]
    assert rest.metadata.resource_version == first.metadata.resource_version
    assert not rest.metadata._continue


def test_a_token_that_is_not_one_is_a_bad_request(api: client.ApiClient, ns: str) -> None:
    with pytest.raises(client.ApiException) as refused:
        client.CoreV1Api(api).list_namespaced_pod(ns, limit=2, _continue="not-a-token")
    assert refused.value.status == 400
