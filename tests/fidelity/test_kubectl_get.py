"""``kubectl get`` prints the columns the API server chose (server-side printing).

kubectl asks for ``as=Table`` and prints what comes back; ``-o wide`` adds the priority-1 columns.
Expected headers and cells: kubernetes/kubernetes ``pkg/printers/internalversion/printers.go``
(``podColumnDefinitions``/``printPod``, ``nodeColumnDefinitions``/``printNode``,
``nodeResourceSliceColumnDefinitions``, ``resourceClaimColumnDefinitions``/``resourceClaimState``,
``eventColumnDefinitions``), and k8s.io/apiserver ``pkg/registry/rest/table.go``
(``NewDefaultTableConvertor``: Name and Created At, for a kind without a printer such as the
DeviceTaintRule). Without the Table, kubectl falls back to NAME and AGE only.
"""

from __future__ import annotations

import uuid

from kubernetes import client

from tests.fidelity.conftest import Kubectl
from tests.sim.conftest import pod_manifest


def _table(kubectl: Kubectl, *args: str) -> list[list[str]]:
    """kubectl's printed table, split on runs of two or more spaces (cells may hold one space)."""
    out = kubectl("get", *args, check=True).stdout
    return [[cell for cell in line.split("  ") if cell.strip()] for line in out.splitlines() if line.strip()]


def _cells(rows: list[list[str]]) -> list[list[str]]:
    return [[c.strip() for c in row] for row in rows]


def test_pods_wide_show_readiness_status_restarts_and_node(api: client.ApiClient, ns: str,
                                                           kubectl: Kubectl) -> None:
    manifest = pod_manifest("printed", nodeName="node-0000")
    del manifest["spec"]["schedulerName"]
    client.CoreV1Api(api).create_namespaced_pod(ns, manifest)
    kubectl("wait", "--for=condition=Ready", "pod/printed", "-n", ns, "--timeout=30s", check=True, timeout=45)
    header, row = _cells(_table(kubectl, "pods", "-n", ns, "-o", "wide"))
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                      "READINESS GATES"]
    named = dict(zip(header, row, strict=True))
    assert (named["NAME"], named["READY"], named["STATUS"], named["RESTARTS"]) == ("printed", "1/1", "Running", "0")
    assert named["NODE"] == "node-0000" and named["NOMINATED NODE"] == "<none>"
    narrow = _cells(_table(kubectl, "pods", "-n", ns))
    assert narrow[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], "priority-1 columns only with -o wide"


def test_a_pod_bound_to_a_ghost_node_is_pending_with_no_ready_container(api: client.ApiClient, ns: str,
                                                                         kubectl: Kubectl) -> None:
    client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest("waiting"))
    header, row = _cells(_table(kubectl, "pod", "waiting", "-n", ns))
    assert dict(zip(header, row, strict=True))["READY"] == "0/1"
    assert dict(zip(header, row, strict=True))["STATUS"] == "Pending"


def test_nodes_wide_show_status_version_and_addresses(kubectl: Kubectl) -> None:
    rows = _cells(_table(kubectl, "nodes", "-o", "wide"))
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                       "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert all(row[1].split(",")[0] in ("Ready", "NotReady", "Unknown") for row in rows[1:])


def test_resource_slices_show_node_driver_and_pool(kubectl: Kubectl) -> None:
    rows = _cells(_table(kubectl, "resourceslices"))
    assert rows[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert len(rows) > 1 and all(len(row) == 5 for row in rows[1:])


def test_a_claim_nobody_allocated_is_pending(api: client.ApiClient, ns: str, kubectl: Kubectl) -> None:
    client.ResourceV1Api(api).create_namespaced_resource_claim(ns, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "printed-claim"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
    rows = _cells(_table(kubectl, "resourceclaims", "-n", ns))
    assert rows[0] == ["NAME", "STATE", "AGE"] and rows[1][:2] == ["printed-claim", "pending"]


def test_a_kind_without_a_printer_shows_name_and_created_at(api: client.ApiClient, kubectl: Kubectl) -> None:
    rules = client.ResourceV1Api(api)
    name = f"printed-{uuid.uuid4().hex[:6]}"
    rules.create_device_taint_rule({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "p", "device": "d"},
                 "taint": {"key": "example.com/printed", "effect": "NoSchedule"}}})
    try:
        rows = _cells(_table(kubectl, "devicetaintrule", name))
        assert rows[0] == ["NAME", "CREATED AT"] and rows[1][0] == name and rows[1][1].endswith("Z")
    finally:
        rules.delete_device_taint_rule(name)


def test_events_show_last_seen_type_reason_object_and_message(api: client.ApiClient, ns: str,
                                                              kubectl: Kubectl) -> None:
    client.CoreV1Api(api).create_namespaced_event(ns, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "printed.1"}, "type": "Warning",
        "reason": "DeviceUnhealthy", "message": "XID 79 on gpu-0",
        "involvedObject": {"kind": "Pod", "name": "trainer", "namespace": ns},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"})
    rows = _cells(_table(kubectl, "events", "-n", ns))
    assert rows[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows[1][1:] == ["Warning", "DeviceUnhealthy", "pod/trainer", "XID 79 on gpu-0"]
