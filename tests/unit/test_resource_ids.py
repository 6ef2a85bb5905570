"""Resolving the resourceIDs the kubelet writes in pod status to DRA devices.

Every resourceID form here is one the kubelet writes (kubernetes/kubernetes
pkg/kubelet/cm/dra/manager.go, ``UpdateAllocatedResourcesStatus``: the first CDI device ID the
driver returned, else ``<driver>/<pool>/<device>``), with the CDI IDs of real drivers:
dra-example-driver ``k8s.gpu.example.com/gpu=<claimUID>-<device>``, Intel QAT
``intel.com/qat=<device>``, a shared ``nvidia.com/gpu=all``, and the v1.34 "Pods Report DRA
Resource Health" post's ``example.com/gpu-a1b2-c3d4``. Entry names are ``claim:<podClaimName>``
or ``claim:<podClaimName>/<request>``; claims are ``resource.k8s.io/v1`` ResourceClaims.
"""

from __future__ import annotations

from typing import Any

import pytest

from podmedic.domain.models import DeviceRef, Health
from podmedic.kube.resource_ids import pod_device_health, resolve

UID = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"


def _claim(*devices: tuple[str, str, str], name: str = "train-0-gpu-x7k2p") -> dict[str, Any]:
    results = [{"request": "gpu", "driver": d, "pool": p, "device": dev} for d, p, dev in devices]
    return {"metadata": {"name": name, "namespace": "default", "uid": UID},
            "status": {"allocation": {"devices": {"results": results}}}}


def _pod(entry: str, resources: list[dict[str, str]], *, generated: str | None = "train-0-gpu-x7k2p",
         named: str | None = None) -> dict[str, Any]:
    claim_ref: dict[str, str] = {"name": "gpu"}
    if named:
        claim_ref["resourceClaimName"] = named
    else:
        claim_ref["resourceClaimTemplateName"] = "gpu"
    status: dict[str, Any] = {"containerStatuses": [
        {"name": "main", "allocatedResourcesStatus": [{"name": entry, "resources": resources}]}]}
    if generated and not named:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": generated}]
    return {"metadata": {"name": "train-0", "namespace": "default", "uid": "pod-uid"},
            "spec": {"resourceClaims": [claim_ref]}, "status": status}


TWO = (("gpu.example.com", "node-1", "gpu-0"), ("gpu.example.com", "node-1", "gpu-1"))
CLAIMS = {"train-0-gpu-x7k2p": _claim(*TWO), "solo": _claim(("qat.intel.com", "node-1", "qat-3"), name="solo")}


@pytest.mark.parametrize(("resource_id", "entry", "named", "expected"), [
    ("gpu.example.com/node-1/gpu-1", "claim:gpu", None, TWO[1]),  # no CDI IDs: the three-part form
    (f"k8s.gpu.example.com/gpu={UID}-gpu-1", "claim:gpu/gpu", None, TWO[1]),  # per-device CDI ID, with request
    (f"k8s.gpu.example.com/gpu={UID}-gpu-0", "claim:gpu", None, TWO[0]),
    ("intel.com/qat=qat-3", "claim:gpu", "solo", ("qat.intel.com", "node-1", "qat-3")),  # claim named in spec
    ("example.com/gpu-a1b2-c3d4", "claim:gpu", "solo", ("qat.intel.com", "node-1", "qat-3")),  # opaque, one device
])
def test_each_form_resolves_to_its_device(resource_id: str, entry: str, named: str | None,
                                          expected: tuple[str, str, str]) -> None:
    pod = _pod(entry, [{"resourceID": resource_id, "health": "Unhealthy"}], named=named)
    found = resolve(resource_id, entry, pod, CLAIMS.get)
    assert found == DeviceRef(driver=expected[0], pool=expected[1], device=expected[2])


@pytest.mark.parametrize(("resource_id", "entry", "pod_kwargs", "why"), [
    ("nvidia.com/gpu=all", "claim:gpu", {}, "matches 0 of its devices"),  # shared by both devices
    (f"k8s.gpu.example.com/gpu={UID}-gpu-1", "claim:gpu", {"generated": "gone-claim"}, "is not known"),
    (f"k8s.gpu.example.com/gpu={UID}-gpu-1", "claim:gpu", {"generated": None}, "has no ResourceClaim"),
    ("GPU-8f3c2d1e-0000-1111-2222-333344445555", "nvidia.com/gpu", {}, "names no DRA claim"),  # device plugin
])
def test_what_cannot_be_told_says_why(resource_id: str, entry: str, pod_kwargs: dict[str, Any], why: str) -> None:
    pod = _pod(entry, [{"resourceID": resource_id, "health": "Unhealthy"}], **pod_kwargs)
    found = resolve(resource_id, entry, pod, CLAIMS.get)
    assert isinstance(found, str) and why in found, found


def test_a_shared_id_repeated_per_device_reports_its_worst_health_as_unresolved() -> None:
    shared = [{"resourceID": "nvidia.com/gpu=all", "health": "Healthy"},
              {"resourceID": "nvidia.com/gpu=all", "health": "Unhealthy", "message": "XID 79"}]
    reported = pod_device_health(_pod("claim:gpu", shared), CLAIMS.get)
    assert reported.devices == {}
    [unresolved] = reported.unresolved
    assert (unresolved.health, unresolved.message, unresolved.claim) == (Health.UNHEALTHY, "XID 79", "gpu")


def test_resolved_devices_keep_health_and_message() -> None:
    resources = [{"resourceID": f"k8s.gpu.example.com/gpu={UID}-gpu-0", "health": "Healthy"},
                 {"resourceID": f"k8s.gpu.example.com/gpu={UID}-gpu-1", "health": "Unknown", "message": "no report"}]
    reported = pod_device_health(_pod("claim:gpu", resources), CLAIMS.get)
    assert reported.unresolved == []
    assert reported.devices == {DeviceRef(driver=TWO[0][0], pool=TWO[0][1], device=TWO[0][2]): (Health.HEALTHY, ""),
                                DeviceRef(driver=TWO[1][0], pool=TWO[1][1], device=TWO[1][2]):
                                    (Health.UNKNOWN, "no report")}


def test_a_pod_that_ended_still_reports_its_device_by_cdi_name() -> None:
    # The API deallocates a claim once no running pod holds it, but the kubelet keeps applying
    # health to the pod's tombstoned claim (manager.go: "Include both active and tombstoned claims").
    deallocated = {"train-0-gpu-x7k2p": {"metadata": {"name": "train-0-gpu-x7k2p", "uid": UID}, "status": {}}}
    rid = f"k8s.gpu.example.com/gpu={UID}-gpu-1"
    reported = pod_device_health(_pod("claim:gpu", [{"resourceID": rid, "health": "Unhealthy"}]), deallocated.get)
    assert reported.devices == {}
    gpu1, gpu0 = (DeviceRef(driver=d[0], pool=d[1], device=d[2]) for d in (TWO[1], TWO[0]))
    assert reported.of(gpu1) == (Health.UNHEALTHY, "") and reported.of(gpu0) is None


def test_the_claim_index_keeps_the_allocation_a_deallocated_claim_had() -> None:
    from workers.ingest.sources.claim_index import ClaimIndex

    index = ClaimIndex()
    index.put(_claim(*TWO))
    index.put({"metadata": {"name": "train-0-gpu-x7k2p", "namespace": "default", "uid": UID}, "status": {}})
    kept = index.get("default", "train-0-gpu-x7k2p")
    assert kept is not None and len(kept["status"]["allocation"]["devices"]["results"]) == 2
    index.put({"metadata": {"name": "train-0-gpu-x7k2p", "namespace": "default", "uid": "another"}, "status": {}})
    assert index.get("default", "train-0-gpu-x7k2p")["status"]["allocation"]["devices"] == {}  # a new claim


def test_a_claim_result_naming_no_valid_device_is_left_out_not_raised() -> None:
    from podmedic.kube.resource_ids import allocated_devices

    claim = _claim(TWO[0], ("gpu.example.com", "node-1", "GPU_9"))
    claim["status"]["allocation"]["devices"]["results"].append({"request": "gpu"})
    assert allocated_devices(claim) == [DeviceRef(driver=TWO[0][0], pool=TWO[0][1], device=TWO[0][2])]
