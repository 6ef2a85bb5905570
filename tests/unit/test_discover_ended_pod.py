"""Discovery finds the pod a fault killed before discovery ran (simulator over real HTTP, real client).

Upstream shapes this rests on: a container of a ``restartPolicy: Never`` pod that dies with an exit
code no ``restartPolicyRules`` entry matches ends the pod ``Failed`` (pkg/kubelet/kuberuntime,
KEP-5307); the resourceclaim controller then removes the pod from the claim's ``reservedFor`` and
a claim reserved for nobody is deallocated (KEP-4381, pkg/controller/resourceclaim); the pod's
``allocatedResourcesStatus`` keeps naming the device by its CDI ID (KEP-4680,
pkg/kubelet/cm/dra/manager.go). CI once saw an incident whose HTTP health event reached the
worker after the pod had ended, and discovery found no pod: no checkpoint, no Events on it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from activities.discover import ENDED_BEFORE_EVENT, DiscoverActivities
from podmedic.domain.models import DeviceRef, Health
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.helpers import run_on_loop, served_sim, wait_until


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("ended")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)))
    yield gateway
    gateway.close()


def _ready_pod(sim: SimCluster, job: str, node: str | None = None) -> dict[str, Any]:
    sim.call(lambda: sim.engine.create_training_job(job, image=f"registry.local/{job}:1", backoff_limit=0,
                                                    node_name=node))
    found: dict[str, Any] = wait_until(
        lambda: next((p for p in sim.state()["pods"] if p.get("job") == job and p.get("ready")), None),
        timeout=30, what=f"a Ready pod of {job}")
    return found


def test_a_pod_the_fault_ended_is_found_by_its_status_once_its_claim_is_released(
        sim: SimCluster, kube: KubeGateway) -> None:
    pod = _ready_pod(sim, "train-ended", node="node-0000")
    device = DeviceRef.parse(pod["devices"][0])
    sim.set_device_health(device.driver, device.pool, device.device, "Unhealthy", reason="XidError", code=79,
                          message="XID 79: GPU has fallen off the bus", crash=True)
    claim_name = wait_until(lambda: _released_claim(kube, pod["namespace"], pod["name"]), timeout=30,
                                 what="the pod Failed and its claim deallocated")

    found = run_on_loop(kube, DiscoverActivities(kube)._discover(device, [], dt.datetime.now(dt.UTC)))

    assert [p.name for p in found.pods] == [pod["name"]], f"claim {claim_name} released; found {found.pods}"
    assert found.reading.health is Health.UNHEALTHY and "allocatedResourcesStatus" in found.reading.source
    assert found.node == device.pool
    # A first event long after the pod ended: the pod ended of something else, before this incident.
    later = dt.datetime.now(dt.UTC) + ENDED_BEFORE_EVENT + dt.timedelta(minutes=1)
    assert run_on_loop(kube, DiscoverActivities(kube)._discover(device, [], later)).pods == []
    # A health read (no first event) is about pods that hold the device now, never one that ended.
    assert run_on_loop(kube, DiscoverActivities(kube)._pods_on(device)) == []


def test_a_pod_that_ended_reporting_the_device_healthy_is_not_this_faults(sim: SimCluster, kube: KubeGateway) -> None:
    pod = _ready_pod(sim, "train-done", node="node-0001")  # not on the device the test above failed
    device = DeviceRef.parse(pod["devices"][0])
    sim.call(lambda: sim.engine.crash_pod(pod["namespace"], pod["name"], exit_code=1))  # a bug; the device is fine
    wait_until(lambda: _released_claim(kube, pod["namespace"], pod["name"]), timeout=30,
                    what="the pod Failed and its claim deallocated")

    assert run_on_loop(kube, DiscoverActivities(kube)._discover(device, [], dt.datetime.now(dt.UTC))).pods == []


def _released_claim(kube: KubeGateway, namespace: str, name: str) -> str | None:
    """The pod's claim, once the pod is Failed and the claim holds no allocation."""
    pod = kube.get_pod(namespace, name)
    if pod is None or (pod.get("status") or {}).get("phase") != "Failed":
        return None
    claim_name = str(pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"])
    claim = kube.get_claim(namespace, claim_name)
    return claim_name if claim is not None and not (claim.get("status") or {}).get("allocation") else None


def _pod(name: str, started: str, ended: str | None = None, claim: str = "") -> dict[str, Any]:
    state = {"terminated": {"exitCode": 134, "finishedAt": ended}} if ended else {"running": {"startedAt": started}}
    return {"metadata": {"name": name, "uid": name, "namespace": "default"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim or f"{name}-gpu"}]},
            "status": {"startTime": started, "containerStatuses": [{"name": "trainer", "state": state}]}}


def test_of_the_pods_that_ended_on_a_device_only_its_present_allocations_count() -> None:
    # A Job's failed pods stay until the Job is deleted, while the device goes on to other claims.
    old = _pod("old", "2026-11-28T09:00:00Z", ended="2026-11-28T09:30:00Z")
    same_second = _pod("same-second", "2026-11-28T09:40:00Z", ended="2026-11-28T10:00:00Z")
    last = _pod("last", "2026-11-28T10:00:00Z", ended="2026-11-28T10:00:00Z")  # died in the second it started
    assert DiscoverActivities._this_allocation([old, same_second, last], []) == [last]
    assert DiscoverActivities._this_allocation([old], []) == [old]
    no_times = {"metadata": {"name": "bare", "uid": "bare"}, "status": {}}
    assert DiscoverActivities._this_allocation([no_times, old], []) == [no_times, old]
    # A pod holding the device now: only pods that shared its claim (one claim, several pods) are its.
    sharing = _pod("sharing", "2026-11-28T09:00:00Z", ended="2026-11-28T09:01:00Z", claim="shared")
    holder = _pod("holder", "2026-11-28T09:00:00Z", claim="shared")
    assert DiscoverActivities._this_allocation([old, sharing, last], [holder]) == [sharing]


def test_a_pod_using_a_claim_by_name_is_found(sim: SimCluster, kube: KubeGateway) -> None:
    # Only claims made from a template are in status.resourceClaimStatuses (k8s.io/api core/v1
    # PodResourceClaimStatus); a claim the pod names itself is in spec.resourceClaims alone.
    api = k8s_config.new_client_from_config(config_file=str(sim.kubeconfig_path))  # type: ignore[no-untyped-call]
    try:
        k8s.ResourceV1Api(api).create_namespaced_resource_claim("default", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "named-gpu"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
        k8s.CoreV1Api(api).create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "named-claim"},
            "spec": {"containers": [{"name": "main", "image": "registry.local/app:1",
                                     "resources": {"claims": [{"name": "gpu"}]}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": "named-gpu"}]}})
    finally:
        api.close()
    pod = wait_until(lambda: next((p for p in sim.state()["pods"] if p["name"] == "named-claim" and p.get("ready")),
                                  None), timeout=30, what="the pod Ready")
    device = DeviceRef.parse(pod["devices"][0])

    found = run_on_loop(kube, DiscoverActivities(kube)._discover(device, [], None))
    assert [p.name for p in found.pods] == ["named-claim"]
