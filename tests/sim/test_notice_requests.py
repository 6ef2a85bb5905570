"""A pod notice writes what it must and nothing more, counted on the simulator's request ledger:
the first notice of an incident annotates the pod, later ones only add their Event."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from activities.notice import NoticeActivities
from podmedic.domain.incident import StepNotice
from podmedic.domain.models import PodKey
from podmedic.domain.steps import PodNoticeInput
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.sim.conftest import Raw


@pytest.fixture(scope="module")
def sim(unaudited_sim: SimCluster) -> SimCluster:
    """This module's gateways speak as the worker and the ingest: a simulator without the RBAC recorder."""
    return unaudited_sim


@pytest.fixture
def notices(sim: SimCluster) -> Iterator[NoticeActivities]:
    """The notice activities on a worker's gateway to the simulator."""
    assert sim.kubeconfig_path is not None
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    try:
        yield NoticeActivities(kube)
    finally:
        kube.close()


def _writes(raw: Raw) -> dict[tuple[str, str], int]:
    """Requests by verb and resource, whatever their answer."""
    counts: Counter[tuple[str, str]] = Counter()
    for e in raw("GET", "/sim/v1/ledger")[1]["entries"]:
        counts[(e["verb"], e["resource"])] += e["count"]
    return dict(counts)


def _pod(api: client.ApiClient, ns: str, name: str) -> PodKey:
    """Create a pod; its key as discovery would give it."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "main", "image": "registry.local/x:1"}]}}
    created: Any = client.CoreV1Api(api).create_namespaced_pod(ns, body)
    return PodKey(namespace=ns, name=name, uid=created.metadata.uid)


def _podmedic_events(api: client.ApiClient, ns: str) -> list[Any]:
    return [e for e in client.CoreV1Api(api).list_namespaced_event(ns).items if e.reason.startswith("Podmedic")]


async def test_later_notices_of_an_incident_skip_the_annotation_write(
    notices: NoticeActivities, raw: Raw, api: client.ApiClient, ns: str
) -> None:
    key = _pod(api, ns, "notice-a")

    async def notice(step: str, url: str) -> bool:
        inp = PodNoticeInput(incident_id="device/d/p/gpu-0", pod=key, reason=f"Podmedic{step}", message=step,
                             annotations={"podmedic.io/incident-url": url})
        return (await notices._notice(inp, key=f"device/d/p/gpu-0#run/{step}")).event_recorded

    raw("DELETE", "/sim/v1/ledger")
    assert await notice("Opened", "http://ui/1")
    assert _writes(raw) == {("get", "pods"): 1, ("patch", "pods"): 1, ("create", "events"): 1}

    raw("DELETE", "/sim/v1/ledger")
    assert await notice("Tainted", "http://ui/1")
    assert _writes(raw) == {("get", "pods"): 1, ("create", "events"): 1}

    raw("DELETE", "/sim/v1/ledger")  # a new run of the incident: its URL changed, so the pod is re-annotated
    assert await notice("Closed", "http://ui/2")
    assert _writes(raw) == {("get", "pods"): 1, ("patch", "pods"): 1, ("create", "events"): 1}

    notes = client.CoreV1Api(api).read_namespaced_pod("notice-a", ns).metadata.annotations
    assert notes == {"podmedic.io/incident": "device/d/p/gpu-0", "podmedic.io/incident-url": "http://ui/2"}
    assert sorted(e.reason for e in _podmedic_events(api, ns)) == ["PodmedicClosed", "PodmedicOpened",
                                                                     "PodmedicTainted"]


async def test_a_notice_to_a_replaced_pod_writes_nothing(
    notices: NoticeActivities, raw: Raw, api: client.ApiClient, ns: str
) -> None:
    _pod(api, ns, "notice-b")
    inp = PodNoticeInput(incident_id="device/d/p/gpu-1", pod=PodKey(namespace=ns, name="notice-b", uid="old-uid"),
                         reason="PodmedicOpened", message="opened")
    raw("DELETE", "/sim/v1/ledger")
    result = await notices._notice(inp)
    assert not result.pod_found and not result.event_recorded
    assert _writes(raw) == {("get", "pods"): 1}


async def test_a_step_notice_to_a_pod_this_run_annotated_writes_the_event_alone(
    notices: NoticeActivities, raw: Raw, api: client.ApiClient, ns: str
) -> None:
    key = _pod(api, ns, "notice-c")

    async def step(name: str, annotated: list[PodKey]) -> list[str]:
        notice = StepNotice(incident_id="device/d/p/gpu-2", run_id="run-1", step=name, reason=f"Podmedic{name}",
                            message=name, pods=[key], annotated=annotated)
        return (await notices._step(notice, "default")).recorded

    raw("DELETE", "/sim/v1/ledger")
    assert await step("Opened", []) == [f"{ns}/notice-c"]
    assert _writes(raw) == {("get", "pods"): 1, ("patch", "pods"): 1, ("create", "events"): 1}

    raw("DELETE", "/sim/v1/ledger")
    assert await step("Tainted", [key]) == [f"{ns}/notice-c"]
    assert await step("Tainted", [key]) == [f"{ns}/notice-c"]  # a retried attempt finds its Event written (409)
    assert _writes(raw) == {("create", "events"): 2}
    assert sorted(e["status"] for e in raw("GET", "/sim/v1/ledger")[1]["entries"]) == [201, 409]

    events = _podmedic_events(api, ns)
    assert sorted(e.reason for e in events) == ["PodmedicOpened", "PodmedicTainted"]
    assert {e.involved_object.uid for e in events} == {key.uid}
