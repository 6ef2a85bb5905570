"""CRUD through the unmodified client: pods, nodes, events, dry runs, subresources, cascading deletes."""

from __future__ import annotations

import pytest
from kubernetes import client

from podmedic_sim import SimCluster
from tests.sim.conftest import pod_manifest


def test_pod_create_get_list_replace_delete(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    created = v1.create_namespaced_pod(ns, pod_manifest("web", {"app": "web"}))
    assert created.metadata.uid and created.metadata.namespace == ns
    assert created.spec.restart_policy == "Always"  # defaulted like the real server
    assert created.status.phase == "Pending"
    got = v1.read_namespaced_pod("web", ns)
    assert got.metadata.uid == created.metadata.uid
    assert [p.metadata.name for p in v1.list_namespaced_pod(ns).items] == ["web"]
    got.metadata.labels["tier"] = "front"
    replaced = v1.replace_namespaced_pod("web", ns, got)
    assert replaced.metadata.labels == {"app": "web", "tier": "front"}
    assert int(replaced.metadata.resource_version) > int(got.metadata.resource_version)
    deleted = v1.delete_namespaced_pod(
        "web", ns, grace_period_seconds=0, propagation_policy="Background"
    )
    assert deleted.metadata.name == "web"
    with pytest.raises(client.ApiException) as err:
        v1.read_namespaced_pod("web", ns)
    assert err.value.status == 404


def test_dry_run_create_stores_nothing(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    made = v1.create_namespaced_pod(ns, pod_manifest("dry"), dry_run="All")
    assert made.metadata.name == "dry" and made.metadata.uid
    assert v1.list_namespaced_pod(ns).items == []


def test_generate_name(api: client.ApiClient, ns: str) -> None:
    body = pod_manifest("x")
    body["metadata"] = {"generateName": "gen-"}
    made = client.CoreV1Api(api).create_namespaced_pod(ns, body)
    assert made.metadata.name.startswith("gen-") and len(made.metadata.name) == 9


def test_status_subresource_keeps_spec_and_main_keeps_status(
    api: client.ApiClient, ns: str
) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, pod_manifest("s"))
    v1.patch_namespaced_pod_status(
        "s", ns, {"status": {"phase": "Running"}, "metadata": {"labels": {"ignored": "yes"}}}
    )
    pod = v1.read_namespaced_pod("s", ns)
    assert pod.status.phase == "Running" and not pod.metadata.labels
    v1.patch_namespaced_pod("s", ns, {"status": {"phase": "Failed"}})
    assert v1.read_namespaced_pod("s", ns).status.phase == "Running"


def test_nodes_get_list_patch_status(api: client.ApiClient, sim: SimCluster) -> None:
    v1 = client.CoreV1Api(api)
    names = [n.metadata.name for n in v1.list_node().items]
    assert "node-0000" in names and "node-0001" in names
    patched = v1.patch_node(
        "node-0001", {"spec": {"taints": [{"key": "podmedic.io/test", "effect": "NoSchedule"}]}}
    )
    assert patched.spec.taints[0].key == "podmedic.io/test"
    cond = {"type": "PodmedicTest", "status": "True", "reason": "Test", "message": "m"}
    v1.patch_node_status("node-0001", {"status": {"conditions": [cond]}})
    conds = v1.read_node_status("node-0001").status.conditions
    assert any(c.type == "PodmedicTest" for c in conds)
    v1.patch_node("node-0001", {"spec": {"taints": None}})
    with pytest.raises(client.ApiException) as err:
        v1.patch_node("node-0001", {"spec": {"taints": [{"key": "k", "effect": "Often"}]}})
    assert err.value.status == 422


def test_events_namespaced_and_all(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
        "reason": "PodmedicIncident",
        "message": "incident opened",
        "type": "Warning",
    }
    v1.create_namespaced_event(ns, event)
    assert [e.reason for e in v1.list_namespaced_event(ns).items] == ["PodmedicIncident"]
    everywhere = v1.list_event_for_all_namespaces(field_selector=f"metadata.namespace={ns}")
    assert [e.metadata.name for e in everywhere.items] == ["e1"]


def test_jobs_and_cascading_delete(api: client.ApiClient, ns: str) -> None:
    b1, v1 = client.BatchV1Api(api), client.CoreV1Api(api)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeName": "ghost-node",
                    "schedulerName": "podmedic-test-none",
                    "containers": [{"name": "t", "image": "i:1"}],
                }
            }
        },
    }
    made = b1.create_namespaced_job(ns, job)
    owned = pod_manifest("train-0")
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": made.metadata.uid}
    ]
    v1.create_namespaced_pod(ns, owned)
    b1.patch_namespaced_job_status("train", ns, {"status": {"active": 1}})
    assert b1.read_namespaced_job_status("train", ns).status.active == 1
    bad = dict(job, metadata={"name": "bad"})
    bad["spec"] = {
        "template": {
            "spec": {
                **job["spec"]["template"]["spec"],  # type: ignore[index]
                "restartPolicy": "Always",
            }
        }
    }
    with pytest.raises(client.ApiException) as err:
        b1.create_namespaced_job(ns, bad)
    assert err.value.status == 422
    b1.delete_namespaced_job("train", ns, propagation_policy="Background")
    assert v1.list_namespaced_pod(ns).items == []


def test_resource_api_objects(api: client.ApiClient, ns: str) -> None:
    r1 = client.ResourceV1Api(api)
    tmpl = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "tolerations": [
                                    {
                                        "key": "podmedic.io/unhealthy",
                                        "operator": "Exists",
                                        "effect": "NoSchedule",
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    r1.create_namespaced_resource_claim_template(ns, tmpl)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": tmpl["spec"]["spec"],
    }  # type: ignore[index]
    r1.create_namespaced_resource_claim(ns, claim)
    r1.patch_namespaced_resource_claim_status(
        "c", ns, {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}}
    )
    assert r1.read_namespaced_resource_claim("c", ns).status.reserved_for[0].name == "p"
    all_claims = r1.list_resource_claim_for_all_namespaces()
    assert ("c", ns) in [(c.metadata.name, c.metadata.namespace) for c in all_claims.items]
    r1.list_device_class()
    r1.list_resource_slice()
