"""Simulated DRA prepare failures, through the unmodified ``kubernetes`` client and raw HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from podmedic_sim import SimCluster
from tests.helpers import wait_until
from tests.sim.conftest import Raw
from tests.simkit import fast_config, gpu_pod, gpu_template

DRIVER = "gpu.nvidia.com"
REASON = "FailedPrepareDynamicResources"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A behaving simulator with fast timings (back-off 0.1 s doubling to 0.4 s)."""
    cluster = SimCluster(fast_config(nodes=1, devices_per_node=2), bookmark_interval_s=0.2)
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("prep") / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


def _devices(sim: SimCluster) -> list[dict[str, Any]]:
    return [d for d in sim.state()["devices"] if d["driver"] == DRIVER]


def _fail_all(raw: Raw, sim: SimCluster, message: str, clear: bool = False) -> None:
    for d in _devices(sim):
        status, body = raw("POST", "/sim/v1/faults/prepare", {"driver": DRIVER, "pool": d["pool"],
                                                               "device": d["device"], "message": message,
                                                               "clear": clear})
        assert status == 200, body
        assert body["prepare_failure"] == (None if clear else message)


def _prepare_events(core: client.CoreV1Api, ns: str, pod: str) -> list[Any]:
    events = core.list_namespaced_event(ns, field_selector=f"reason={REASON},involvedObject.name={pod}").items
    return list(events)


def test_prepare_failure_keeps_the_pod_creating_and_clearing_lets_it_start(
    sim: SimCluster, api: client.ApiClient, raw: Raw, ns: str
) -> None:
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    resource.create_namespaced_resource_claim_template(ns, gpu_template(namespace=ns))
    _fail_all(raw, sim, "invalid opaque config: unknown field sharingStrategy")
    name = f"p-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(ns, gpu_pod(name, namespace=ns))

    first = wait_until(lambda: _prepare_events(core, ns, name), timeout=10, what="a prepare failure Event")
    event = first[0]
    assert event.type == "Warning"
    assert event.message == f"failed to prepare dynamic resources: {DRIVER}: invalid opaque config: unknown field " \
                            "sharingStrategy"
    assert event.involved_object.kind == "Pod" and event.involved_object.name == name
    # The kubelet retries with back-off; the recorder aggregates into one Event.
    bumped = wait_until(lambda: [e for e in _prepare_events(core, ns, name) if (e.count or 0) >= 3],
                        timeout=10, what="the Event's count to grow")
    assert len(_prepare_events(core, ns, name)) == 1
    assert bumped[0].metadata.uid == event.metadata.uid
    assert bumped[0].last_timestamp >= event.last_timestamp

    pod = core.read_namespaced_pod(name, ns)
    assert pod.status.phase == "Pending"
    waiting = pod.status.container_statuses[0].state.waiting
    assert waiting is not None and waiting.reason == "ContainerCreating"
    assert pod.spec.node_name and pod.status.resource_claim_statuses

    _fail_all(raw, sim, "", clear=True)
    wait_until(lambda: core.read_namespaced_pod(name, ns).status.phase == "Running", timeout=10,
               what="the pod to start after clearing")
    count = _prepare_events(core, ns, name)[0].count
    assert core.read_namespaced_pod(name, ns).status.container_statuses[0].state.running is not None
    assert _prepare_events(core, ns, name)[0].count == count  # no more failures once it started


def test_prepare_fault_is_checked_only_when_a_pod_starts(
    sim: SimCluster, api: client.ApiClient, raw: Raw, ns: str
) -> None:
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    resource.create_namespaced_resource_claim_template(ns, gpu_template(namespace=ns))
    name = f"r-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(ns, gpu_pod(name, namespace=ns))
    wait_until(lambda: core.read_namespaced_pod(name, ns).status.phase == "Running", timeout=10, what="running")
    _fail_all(raw, sim, "device gpu is unhealthy: XID 79")
    try:
        assert core.read_namespaced_pod(name, ns).status.phase == "Running"
        assert not _prepare_events(core, ns, name)
        assert {d["prepare_failure"] for d in sim.state()["devices"]} == {"device gpu is unhealthy: XID 79"}
    finally:
        _fail_all(raw, sim, "", clear=True)


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"driver": DRIVER, "pool": "node-0000", "device": "gpu-0"}, 400, "message"),
        ({"driver": DRIVER, "pool": "node-0000", "device": "gpu-0", "message": 5}, 400, "message"),
        ({"driver": DRIVER, "pool": "node-0000", "device": "gpu-0", "message": "x", "extra": 1}, 400, "extra"),
        ({"driver": DRIVER, "pool": "node-0000", "device": "gpu-99", "message": "x"}, 404, "gpu-99"),
    ],
)
def test_prepare_fault_bad_input(raw: Raw, body: dict[str, Any], status: int, needle: str) -> None:
    got, answer = raw("POST", "/sim/v1/faults/prepare", body)
    assert got == status, answer
    assert needle in answer["error"]


def test_clear_without_message_is_fine(raw: Raw, sim: SimCluster) -> None:
    got, answer = raw("POST", "/sim/v1/faults/prepare",
                      {"driver": DRIVER, "pool": "node-0000", "device": "gpu-0", "clear": True})
    assert got == 200 and answer["prepare_failure"] is None
