"""``kubectl wait`` and the streaming list it asks for (KEP-3157 WatchList).

kubectl 1.35 and later watch with ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan&
allowWatchBookmarks=true`` and wait for the BOOKMARK annotated ``k8s.io/initial-events-end`` before
they trust the state (client-go ``tools/cache/reflector.go`` watchList; the annotation is
``metav1.InitialEventsAnnotationKey``). The server refuses ``sendInitialEvents`` without
``resourceVersionMatch=NotOlderThan`` and without bookmarks (k8s.io/apimachinery
``pkg/apis/meta/internalversion/validation`` ``ValidateListOptions``: 422 Invalid ListOptions).
"""

from __future__ import annotations

import json

from kubernetes import client

from tests.fidelity.conftest import Kubectl
from tests.sim.conftest import pod_manifest


def _running_pod(api: client.ApiClient, ns: str, name: str) -> None:
    manifest = pod_manifest(name, nodeName="node-0000")
    del manifest["spec"]["schedulerName"]
    client.CoreV1Api(api).create_namespaced_pod(ns, manifest)


def test_kubectl_wait_for_ready_returns_once_the_pod_is_ready(api: client.ApiClient, ns: str,
                                                              kubectl: Kubectl) -> None:
    _running_pod(api, ns, "waited")
    done = kubectl("wait", "--for=condition=Ready", "pod/waited", "-n", ns, "--timeout=30s", timeout=45)
    assert done.returncode == 0 and "condition met" in done.stdout, done.stderr


def test_a_streaming_list_ends_its_initial_events_with_the_annotated_bookmark(api: client.ApiClient, ns: str,
                                                                              kubectl: Kubectl) -> None:
    for name in ("first", "second"):
        client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest(name))
    raw = kubectl("get", "--raw", f"/api/v1/namespaces/{ns}/pods?watch=true&sendInitialEvents=true"
                  "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", check=True)
    events = [json.loads(line) for line in raw.stdout.splitlines() if line.strip()]
    initial = [e["object"]["metadata"]["name"] for e in events[:2]]
    assert [e["type"] for e in events[:2]] == ["ADDED", "ADDED"] and sorted(initial) == ["first", "second"]
    end = events[2]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(end["object"]["metadata"]["resourceVersion"]) > 0


def test_initial_events_without_not_older_than_or_bookmarks_are_refused(ns: str, kubectl: Kubectl) -> None:
    for query in ("sendInitialEvents=true&allowWatchBookmarks=true",
                  "sendInitialEvents=true&resourceVersionMatch=NotOlderThan"):
        refused = kubectl("get", "--raw", f"/api/v1/namespaces/{ns}/pods?watch=true&{query}&timeoutSeconds=1")
        assert refused.returncode != 0 and "is invalid" in refused.stderr, refused.stderr
