"""A pod notice writes what it must and nothing more, counted on the simulator's request ledger:
the first notice of an incident annotates the pod, later ones only add their Event."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kubernetes import client

from activities.kube import KubeGateway
from activities.notice import NoticeActivities
from podmedic.incident import StepNotice
from podmedic.models import PodKey
from podmedic.sim import SimCluster
from podmedic.steps import PodNoticeInput
from tests.sim.conftest import Raw


def _writes(raw: Raw) -> dict[tuple[str, str], int]:
    """Requests by verb and resource, whatever their answer."""
    counts: Counter[tuple[str, str]] = Counter()
    for e in raw("GET", "/sim/v1/ledger")[1]["entries"]:
        counts[(e["verb"], e["resource"])] += e["count"]
    return dict(counts)


def _pod(api: client.ApiClient, ns: str, name: str) -> Any:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "main", "image": "registry.local/x:1"}]}}
    return client.CoreV1Api(api).create_namespaced_pod(ns, body)


def test_later_notices_of_an_incident_skip_the_annotation_write(
    sim: SimCluster, raw: Raw, api: client.ApiClient, ns: str
) -> None:
    assert sim.kubeconfig_path is not None
    created = _pod(api, ns, "notice-a")
    key = PodKey(namespace=ns, name="notice-a", uid=created.metadata.uid)
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    notices = NoticeActivities(kube)

    def notice(step: str, url: str) -> bool:
        inp = PodNoticeInput(incident_id="device/d/p/gpu-0", pod=key, reason=f"Podmedic{step}", message=step,
                             annotations={"podmedic.io/incident-url": url})
        return notices._notice(inp, key=f"device/d/p/gpu-0#run/{step}").event_recorded

    try:
        raw("DELETE", "/sim/v1/ledger")
        assert notice("Opened", "http://ui/1")
        assert _writes(raw) == {("get", "pods"): 1, ("patch", "pods"): 1, ("create", "events"): 1}

        raw("DELETE", "/sim/v1/ledger")
        assert notice("Tainted", "http://ui/1")
        assert _writes(raw) == {("get", "pods"): 1, ("create", "events"): 1}

        raw("DELETE", "/sim/v1/ledger")  # a new run of the incident: its URL changed, so the pod is re-annotated
        assert notice("Closed", "http://ui/2")
        assert _writes(raw) == {("get", "pods"): 1, ("patch", "pods"): 1, ("create", "events"): 1}
    finally:
        kube.close()
    notes = client.CoreV1Api(api).read_namespaced_pod("notice-a", ns).metadata.annotations
    assert notes == {"podmedic.io/incident": "device/d/p/gpu-0", "podmedic.io/incident-url": "http://ui/2"}
    reasons = sorted(e.reason for e in client.CoreV1Api(api).list_namespaced_event(ns).items
                     if e.reason.startswith("Podmedic"))
    assert reasons == ["PodmedicClosed", "PodmedicOpened", "PodmedicTainted"]


def test_a_notice_to_a_replaced_pod_writes_nothing(sim: SimCluster, raw: Raw, api: client.ApiClient, ns: str) -> None:
    assert sim.kubeconfig_path is not None
    _pod(api, ns, "notice-b")
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    inp = PodNoticeInput(incident_id="device/d/p/gpu-1", pod=PodKey(namespace=ns, name="notice-b", uid="old-uid"),
                         reason="PodmedicOpened", message="opened")
    try:
        raw("DELETE", "/sim/v1/ledger")
        result = NoticeActivities(kube)._notice(inp)
    finally:
        kube.close()
    assert not result.pod_found and not result.event_recorded
    assert _writes(raw) == {("get", "pods"): 1}


def test_a_step_notice_to_a_pod_this_run_annotated_writes_the_event_alone(
    sim: SimCluster, raw: Raw, api: client.ApiClient, ns: str
) -> None:
    assert sim.kubeconfig_path is not None
    created = _pod(api, ns, "notice-c")
    key = PodKey(namespace=ns, name="notice-c", uid=created.metadata.uid)
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    notices = NoticeActivities(kube)

    def step(name: str, annotated: list[PodKey]) -> list[str]:
        notice = StepNotice(incident_id="device/d/p/gpu-2", run_id="run-1", step=name, reason=f"Podmedic{name}",
                            message=name, pods=[key], annotated=annotated)
        return notices._step(notice, "default").recorded

    try:
        raw("DELETE", "/sim/v1/ledger")
        assert step("Opened", []) == [f"{ns}/notice-c"]
        assert _writes(raw) == {("get", "pods"): 1, ("patch", "pods"): 1, ("create", "events"): 1}
        raw("DELETE", "/sim/v1/ledger")
        assert step("Tainted", [key]) == [f"{ns}/notice-c"]
        assert step("Tainted", [key]) == [f"{ns}/notice-c"]  # a retried attempt finds its Event written (409)
        assert _writes(raw) == {("create", "events"): 2}
        statuses = sorted(e["status"] for e in raw("GET", "/sim/v1/ledger")[1]["entries"])
        assert statuses == [201, 409]
    finally:
        kube.close()
    events = [e for e in client.CoreV1Api(api).list_namespaced_event(ns).items if e.reason.startswith("Podmedic")]
    assert sorted(e.reason for e in events) == ["PodmedicOpened", "PodmedicTainted"]
    assert {e.involved_object.uid for e in events} == {created.metadata.uid}
