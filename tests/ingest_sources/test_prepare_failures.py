"""The prepare-failure source against the simulator, through the real client."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from podmedic.domain.models import ConfigProblem, DeviceHealthEvent, Health
from podmedic.domain.policy_file import PolicySet, load_policy
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.helpers import wait_until
from tests.ingest_sources.conftest import Running, free_devices, start_pod
from workers.ingest.sources import PrepareFailureSource

BAD_CONFIG = "invalid opaque config: unknown field sharingStrategy"
DEVICE = "device is unhealthy: XID 79, fallen off the bus"


@pytest.fixture(scope="module")
def policies() -> PolicySet:
    return load_policy(None)


@pytest.fixture
def failing(sim: SimCluster) -> Iterator[Callable[[str], None]]:
    """Make every free device fail to prepare with a message; cleared at the end."""
    faulted: list[tuple[str, str, str]] = []

    def fail(message: str) -> None:
        for driver, pool, device in free_devices(sim):
            sim.set_prepare_failure(driver, pool, device, message)
            faulted.append((driver, pool, device))

    yield fail
    for driver, pool, device in faulted:
        sim.set_prepare_failure(driver, pool, device, clear=True)


def _event_count(api: client.ApiClient, pod: str) -> int:
    events = client.CoreV1Api(api).list_namespaced_event(
        "default", field_selector=f"reason=FailedPrepareDynamicResources,involvedObject.name={pod}").items
    return max((e.count or 0 for e in events), default=0)


def test_bad_config_is_one_config_problem_whatever_the_kubelet_repeats(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, policies: PolicySet,
    failing: Callable[[str], None], run_source: Callable[..., Running],
) -> None:
    failing(BAD_CONFIG)
    pod = start_pod(sim, api, ready=False)
    running = run_source(PrepareFailureSource(kube, policies, watch_timeout_s=2))
    [problem] = running.wait_for(lambda o: isinstance(o, ConfigProblem) and o.pod.uid == pod["uid"],
                                 what="the config problem")
    assert isinstance(problem, ConfigProblem)
    assert (problem.pod.name, problem.pod.uid, problem.driver) == (pod["name"], pod["uid"], "gpu.nvidia.com")
    assert problem.message == f"failed to prepare dynamic resources: gpu.nvidia.com: {BAD_CONFIG}"
    assert problem.node == pod["node"] and problem.reason == "FailedPrepareDynamicResources"
    wait_until(lambda: _event_count(api, pod["name"]) >= 4, timeout=10, what="the kubelet to retry")
    running.quiet(0.3)
    assert running.matching(lambda o: o.pod is not None and o.pod.uid == pod["uid"]) == [problem], \
        "count bumps of the same Event are no new observation"


def test_device_failure_is_one_event_per_allocated_device(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, policies: PolicySet,
    failing: Callable[[str], None], run_source: Callable[..., Running],
) -> None:
    running = run_source(PrepareFailureSource(kube, policies, watch_timeout_s=2))
    running.ready()
    failing(DEVICE)
    pod = start_pod(sim, api, count=2, ready=False)
    found = running.wait_for(lambda o: isinstance(o, DeviceHealthEvent), count=2, what="two device events")
    assert sorted(o.device.resource_id for o in found if isinstance(o, DeviceHealthEvent)) == sorted(pod["devices"])
    for event in found:
        assert isinstance(event, DeviceHealthEvent)
        assert event.health is Health.UNHEALTHY and event.reason == "FailedPrepareDynamicResources"
        assert event.code == 79 and event.node == pod["node"] and event.source == "prepare-failure"
        assert event.pod is not None and event.pod.uid == pod["uid"]
    assert len({o.event_id for o in found}) == 2
    wait_until(lambda: _event_count(api, pod["name"]) >= 3, timeout=10, what="the kubelet to retry")
    running.quiet(0.3)
    assert len(running.matching(lambda o: o.pod is not None and o.pod.uid == pod["uid"])) == 2


def test_a_failure_the_pod_got_past_is_not_reported_on_relist(
    sim: SimCluster, kube: KubeGateway, api: client.ApiClient, policies: PolicySet, run_source: Callable[..., Running],
) -> None:
    devices = free_devices(sim)
    for driver, pool, device in devices:
        sim.set_prepare_failure(driver, pool, device, DEVICE)
    pod = start_pod(sim, api, ready=False)
    wait_until(lambda: _event_count(api, pod["name"]) >= 1, timeout=10, what="a prepare failure")
    for driver, pool, device in devices:
        sim.set_prepare_failure(driver, pool, device, clear=True)
    wait_until(lambda: [p for p in sim.state()["pods"] if p["name"] == pod["name"] and p["ready"]], timeout=10,
               what="the pod to start")
    running = run_source(PrepareFailureSource(kube, policies, watch_timeout_s=2))
    running.ready()
    assert running.source.stats.lists == 1
    assert not running.matching(lambda o: o.pod is not None and o.pod.uid == pod["uid"])
