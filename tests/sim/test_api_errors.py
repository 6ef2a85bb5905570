"""What the API server refuses, through the unmodified client: 404, 409 conflicts, 422 with causes,
malformed bodies and media types."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse

import pytest
from kubernetes import client

from podmedic_sim import SimCluster
from tests.sim.conftest import Raw, pod_manifest


def test_not_found_is_a_status(raw: Raw, ns: str) -> None:
    status, body = raw("GET", f"/api/v1/namespaces/{ns}/pods/missing")
    assert status == 404
    assert body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["details"] == {"name": "missing", "kind": "pods"}
    status, body = raw("GET", "/apis/resource.k8s.io/v1/nothings")
    assert status == 404 and body["kind"] == "Status"


def test_stale_update_and_patch_conflict(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    first = v1.create_namespaced_pod(ns, pod_manifest("c1"))
    v1.patch_namespaced_pod("c1", ns, {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(client.ApiException) as err:
        v1.replace_namespaced_pod("c1", ns, first)
    assert err.value.status == 409 and '"reason":"Conflict"' in err.value.body
    stale = {"metadata": {"resourceVersion": first.metadata.resource_version, "labels": {"x": "2"}}}
    with pytest.raises(client.ApiException) as err:
        v1.patch_namespaced_pod("c1", ns, stale)
    assert err.value.status == 409
    assert v1.read_namespaced_pod("c1", ns).metadata.labels == {"x": "1"}


def test_a_patch_without_resource_version_wins_over_a_write_made_while_its_body_was_sent(
    api: client.ApiClient, sim: SimCluster, ns: str
) -> None:
    # The API server never answers such a patch with a conflict: podmedic's annotation patches
    # used to fail (409) when the simulated workload wrote the pod while the body was in flight.
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("slow"))
    url = urllib.parse.urlsplit(sim.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    body = json.dumps({"metadata": {"annotations": {"slow": "1"}}}).encode()
    conn.putrequest("PATCH", f"/api/v1/namespaces/{ns}/pods/slow")
    conn.putheader("Content-Type", "application/merge-patch+json")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    time.sleep(0.2)  # the server has the headers and awaits the body
    v1.patch_namespaced_pod("slow", ns, {"metadata": {"labels": {"meanwhile": "1"}}})
    conn.send(body)
    answer = conn.getresponse()
    assert answer.status == 200, answer.read()
    conn.close()
    pod = v1.read_namespaced_pod("slow", ns)
    assert pod.metadata.annotations == {"slow": "1"} and pod.metadata.labels == {"meanwhile": "1"}


def test_already_exists(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("dup"))
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_pod(ns, pod_manifest("dup"))
    assert err.value.status == 409 and "AlreadyExists" in err.value.body


def test_unknown_fields_follow_the_field_validation_directive(raw: Raw, ns: str) -> None:
    """KEP-2885: Strict refuses with the strict decoder's words (400), the default (Warn) and Ignore drop the
    field. The client refuses unknown fields itself, so the unknown field goes over raw HTTP."""
    body = pod_manifest("bad")
    body["spec"]["containers"][0]["bogus"] = True
    status, resp = raw("POST", f"/api/v1/namespaces/{ns}/pods?fieldValidation=Strict", body)
    assert status == 400 and resp["reason"] == "BadRequest"
    assert resp["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                               'unknown field "spec.containers[0].bogus"')
    status, resp = raw("POST", f"/api/v1/namespaces/{ns}/pods?fieldValidation=Sometimes", body)
    assert status == 400 and "fieldValidation" in resp["message"]
    status, created = raw("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert status == 201 and "bogus" not in created["spec"]["containers"][0]


def test_invalid_objects_are_422_with_causes(api: client.ApiClient, raw: Raw, ns: str) -> None:
    body = pod_manifest("bad")
    body["spec"]["containers"][0]["image"] = 7
    status, resp = raw("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert status == 422 and resp["reason"] == "Invalid"
    assert any(c["field"] == "spec.containers[0].image" for c in resp["details"]["causes"])
    v1 = client.CoreV1Api(api)
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_pod(ns, pod_manifest("bad", restartPolicy="Sometimes"))
    assert err.value.status == 422 and "spec.restartPolicy" in err.value.body
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_pod(ns, pod_manifest("Bad_Name"))
    assert err.value.status == 422 and "metadata.name" in err.value.body
    tol = [{"key": "k", "operator": "Maybe", "effect": "NoSchedule"}]
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_pod(ns, pod_manifest("tol", tolerations=tol))
    assert err.value.status == 422 and "spec.tolerations[0].operator" in err.value.body
    assert v1.list_namespaced_pod(ns).items == []


def test_device_taint_rule_effect_is_checked(api: client.ApiClient) -> None:
    r1 = client.ResourceV1Api(api)

    def rule(effect: str) -> dict[str, object]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": f"r-{effect.lower()}"},
            "spec": {
                "deviceSelector": {
                    "driver": "gpu.nvidia.com",
                    "pool": "node-0000",
                    "device": "gpu-0",
                },
                "taint": {"key": "podmedic.io/unhealthy", "effect": effect},
            },
        }

    with pytest.raises(client.ApiException) as err:
        r1.create_device_taint_rule(rule("Sometimes"))
    assert err.value.status == 422
    assert '"field":"spec.taint.effect"' in err.value.body
    assert '"reason":"FieldValueNotSupported"' in err.value.body
    made = r1.create_device_taint_rule(rule("NoSchedule"))
    assert made.spec.taint.effect == "NoSchedule"
    made.status = {
        "conditions": [
            {
                "type": "EvictionInProgress",
                "status": "False",
                "reason": "NoEffect",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    with_status = r1.replace_device_taint_rule_status(made.metadata.name, made)
    assert with_status.status.conditions[0].type == "EvictionInProgress"
    r1.delete_device_taint_rule(made.metadata.name)
    assert made.metadata.name not in [r.metadata.name for r in r1.list_device_taint_rule().items]


def test_malformed_json_and_media_types(raw: Raw, ns: str) -> None:
    status, body = raw("POST", f"/api/v1/namespaces/{ns}/pods", b"{not json")
    assert status == 400 and body["reason"] == "BadRequest"
    raw("POST", f"/api/v1/namespaces/{ns}/pods", pod_manifest("m"))
    status, body = raw(
        "PATCH", f"/api/v1/namespaces/{ns}/pods/m", {"a": 1}, ctype="application/apply-patch+yaml"
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


def test_missing_namespace_is_404(api: client.ApiClient) -> None:
    with pytest.raises(client.ApiException) as err:
        client.CoreV1Api(api).create_namespaced_pod("no-such-ns", pod_manifest("x"))
    assert err.value.status == 404 and "namespaces" in err.value.body


def test_a_custom_object_gets_the_checks_every_custom_object_gets(api: client.ApiClient, ns: str) -> None:
    # A CRD-served kind (JobSet): the API server checks apiVersion, kind, metadata and that spec/status are
    # objects (a structural schema's root types) for every custom resource; podmedic_sim/validation.py.
    custom = client.CustomObjectsApi(api)
    good = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
            "spec": {"replicatedJobs": []}}
    assert custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", good)["spec"]
    for bad, field in (({**good, "metadata": {"name": "js2"}, "spec": "all"}, "spec"),
                       ({**good, "metadata": {"name": "Not_A_Name"}}, "metadata.name")):
        with pytest.raises(client.ApiException) as err:
            custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", bad)
        assert err.value.status == 422, err.value.body
        assert json.loads(err.value.body)["details"]["causes"][0]["field"] == field, err.value.body
