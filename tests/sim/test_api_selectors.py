"""Label and field selectors, and ``limit``/``continue`` paging."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.sim.conftest import Raw, pod_manifest


@pytest.fixture
def labelled(api: client.ApiClient, ns: str) -> str:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("a", {"app": "train", "tier": "gpu"}))
    v1.create_namespaced_pod(ns, pod_manifest("b", {"app": "train"}))
    v1.create_namespaced_pod(ns, pod_manifest("c", {"app": "serve", "tier": "cpu"}))
    v1.patch_namespaced_pod_status("a", ns, {"status": {"phase": "Running"}})
    return ns


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=train", ["a", "b"]),
        ("app==train", ["a", "b"]),
        ("app!=train", ["c"]),
        ("app in (serve, other)", ["c"]),
        ("app notin (serve)", ["a", "b"]),
        ("tier", ["a", "c"]),
        ("!tier", ["b"]),
        ("app=train,tier", ["a"]),
    ],
)
def test_label_selectors(
    api: client.ApiClient, labelled: str, selector: str, expected: list[str]
) -> None:
    pods = client.CoreV1Api(api).list_namespaced_pod(labelled, label_selector=selector)
    assert [p.metadata.name for p in pods.items] == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=b", ["b"]),
        ("status.phase=Running", ["a"]),
        ("status.phase!=Running", ["b", "c"]),
        ("spec.nodeName=ghost-node,metadata.name!=a", ["b", "c"]),
    ],
)
def test_field_selectors(
    api: client.ApiClient, labelled: str, selector: str, expected: list[str]
) -> None:
    pods = client.CoreV1Api(api).list_namespaced_pod(labelled, field_selector=selector)
    assert [p.metadata.name for p in pods.items] == expected


def test_field_selector_namespace_cluster_wide(api: client.ApiClient, labelled: str) -> None:
    pods = client.CoreV1Api(api).list_pod_for_all_namespaces(
        field_selector=f"metadata.namespace={labelled}"
    )
    assert sorted(p.metadata.name for p in pods.items) == ["a", "b", "c"]


def test_bad_selectors_are_400(raw: Raw, labelled: str) -> None:
    status, body = raw("GET", f"/api/v1/namespaces/{labelled}/pods?fieldSelector=spec.bogus%3Dx")
    assert status == 400 and "field label not supported" in body["message"]
    status, body = raw("GET", f"/api/v1/namespaces/{labelled}/pods?labelSelector=%3D%3D%3D")
    assert status == 400 and body["kind"] == "Status"


def test_limit_and_continue(api: client.ApiClient, labelled: str) -> None:
    v1 = client.CoreV1Api(api)
    first = v1.list_namespaced_pod(labelled, limit=2)
    assert [p.metadata.name for p in first.items] == ["a", "b"]
    assert first.metadata.remaining_item_count == 1
    rest = v1.list_namespaced_pod(labelled, limit=2, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["c"]
    assert not rest.metadata._continue
