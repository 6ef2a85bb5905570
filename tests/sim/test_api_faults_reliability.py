"""The fault kinds the reliability suite injects: 403/422, probability, watch disconnects, and
the request ledger that counts podmedic's requests with their answers."""

from __future__ import annotations

import time

import pytest
import urllib3
from kubernetes import client, watch

from podmedic.kube.gateway import Conflict, Forbidden, InvalidObject, KubeGateway, ServerError
from podmedic_sim import SimCluster
from tests.helpers import run_on_loop
from tests.sim.conftest import Raw


@pytest.fixture(scope="module")
def sim(unaudited_sim: SimCluster) -> SimCluster:
    """This module's gateways speak as the worker and the ingest: a simulator without the RBAC recorder."""
    return unaudited_sim


@pytest.mark.parametrize(("status", "error"), [(403, Forbidden), (422, InvalidObject)])
def test_403_and_422_reach_the_gateway_as_non_retryable_kinds(
    sim: SimCluster, raw: Raw, status: int, error: type[Exception]
) -> None:
    assert sim.kubeconfig_path is not None
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    raw("POST", "/sim/v1/faults/api", {"verbs": ["get"], "resources": ["nodes"], "status": status, "count": 1})
    try:
        with pytest.raises(error) as err:
            kube.get_node("node-0000")
        assert str(status) in str(err.value) and "injected" in str(err.value)
        assert kube.get_node("node-0000") is not None  # count: 1 spent
    finally:
        raw("DELETE", "/sim/v1/faults/api")
        kube.close()


def test_a_read_is_tried_again_after_a_5xx_and_a_write_is_not(sim: SimCluster, raw: Raw) -> None:
    assert sim.kubeconfig_path is not None
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    try:
        # Two 503s then an answer: the read succeeds within one call (three tries).
        raw("POST", "/sim/v1/faults/api", {"verbs": ["get"], "resources": ["nodes"], "status": 503, "count": 2})
        assert kube.get_node("node-0000") is not None
        # Three 503s: the third try fails too, and the error reaches the caller (the activity's retry).
        raw("POST", "/sim/v1/faults/api", {"verbs": ["get"], "resources": ["nodes"], "status": 503, "count": 3})
        with pytest.raises(ServerError):
            kube.get_node("node-0000")
        # A write is never tried again here: a 503 after the server acted must go to the idempotent step.
        raw("POST", "/sim/v1/faults/api", {"verbs": ["patch"], "resources": ["nodes"], "status": 503, "count": 1})
        with pytest.raises(ServerError):
            kube.patch_node("node-0000", {"metadata": {"labels": {"podmedic-test": "x"}}})
    finally:
        raw("DELETE", "/sim/v1/faults/api")
        kube.close()


def test_unknown_status_is_refused_with_the_field(raw: Raw) -> None:
    status, body = raw("POST", "/sim/v1/faults/api", {"status": 418})
    assert status == 400 and body["error"][0]["loc"] == ["status"] and "403" in body["error"][0]["msg"]


def test_probability_hits_about_that_share(api: client.ApiClient, raw: Raw) -> None:
    raw("POST", "/sim/v1/faults/api", {"verbs": ["get"], "resources": ["namespaces"], "status": 503,
                                       "probability": 0.3})
    v1 = client.CoreV1Api(api)
    failed = 0
    try:
        for _ in range(200):
            try:
                v1.read_namespace("default")
            except client.ApiException as exc:
                assert exc.status == 503
                failed += 1
    finally:
        raw("DELETE", "/sim/v1/faults/api")
    assert 25 <= failed <= 95, failed  # 60 expected; far outside means the rule ignores probability


def test_watch_disconnect_breaks_the_stream_mid_way(api: client.ApiClient, raw: Raw) -> None:
    raw("POST", "/sim/v1/faults/api", {"verbs": ["watch"], "resources": ["nodes"], "disconnect_after_ms": 300})
    v1 = client.CoreV1Api(api)
    started = time.monotonic()
    seen = 0
    try:
        with pytest.raises((urllib3.exceptions.ProtocolError, urllib3.exceptions.HTTPError)):
            for _ in watch.Watch().stream(v1.list_node, timeout_seconds=10):
                seen += 1
    finally:
        raw("DELETE", "/sim/v1/faults/api")
    assert seen >= 1  # the synthetic ADDED events came before the cut
    assert time.monotonic() - started < 5  # cut at 0.3 s, not the 10 s timeout


def test_ledger_counts_podmedic_requests_and_injected_answers(sim: SimCluster, raw: Raw) -> None:
    assert sim.kubeconfig_path is not None
    raw("DELETE", "/sim/v1/ledger")
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    # Three 500s: a read is tried three times (KubeGateway._read) before the error reaches the caller.
    raw("POST", "/sim/v1/faults/api", {"verbs": ["get"], "resources": ["nodes"], "status": 500, "count": 3})
    try:
        with pytest.raises(Exception):  # noqa: B017 - the kind is tested above
            kube.get_node("node-0000")
        kube.get_node("node-0000")
        rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "ledger-t"},
                "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-0000", "device": "gpu-0"},
                         "taint": {"key": "podmedic.io/unhealthy", "effect": "NoSchedule"}}}

        async def create_and_delete() -> None:
            made = await kube.aio.create_taint_rule(rule)
            await kube.aio.delete_taint_rule_if_unchanged("ledger-t", made["metadata"]["resourceVersion"])

        run_on_loop(kube, create_and_delete())
    finally:
        raw("DELETE", "/sim/v1/faults/api")
        kube.close()
    client.CoreV1Api(config_api(sim)).list_node()  # a test client: not counted
    entries = raw("GET", "/sim/v1/ledger")[1]["entries"]
    gets = {e["status"]: e["count"] for e in entries if e["verb"] == "get" and e["resource"] == "nodes"}
    assert gets == {500: 3, 200: 1}
    creates = [e for e in entries if e["resource"] == "devicetaintrules" and e["verb"] == "create"]
    assert [(c["device"], c["status"], c["count"]) for c in creates] == [("gpu.nvidia.com/node-0000/gpu-0", 201, 1)]
    assert all(e["component"] == "worker" for e in entries)


def config_api(sim: SimCluster) -> client.ApiClient:
    """A plain client (no podmedic User-Agent)."""
    from kubernetes import config

    assert sim.kubeconfig_path is not None
    return config.new_client_from_config(str(sim.kubeconfig_path))


def test_components_limit_a_rule_to_those_podmedic_components(sim: SimCluster, raw: Raw) -> None:
    assert sim.kubeconfig_path is not None
    worker = KubeGateway(sim.kubeconfig_path, component="worker")
    ingest = KubeGateway(sim.kubeconfig_path, component="ingest")
    # A pod read: both components may.
    raw("POST", "/sim/v1/faults/api", {"verbs": ["get"], "resources": ["pods"], "status": 503,
                                       "components": ["ingest"]})
    try:
        assert worker.get_pod("default", "no-such-pod") is None  # a 404, not the injected 503
        with pytest.raises(Exception, match="503"):
            ingest.get_pod("default", "no-such-pod")
    finally:
        raw("DELETE", "/sim/v1/faults/api")
        worker.close()
        ingest.close()


def test_an_eviction_conflict_while_the_pod_is_still_there_is_no_eviction(
    sim: SimCluster, api: client.ApiClient, raw: Raw
) -> None:
    assert sim.kubeconfig_path is not None
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "evict-409"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    uid = client.CoreV1Api(api).create_namespaced_pod("default", body).metadata.uid
    kube = KubeGateway(sim.kubeconfig_path, component="worker")
    raw("POST", "/sim/v1/faults/api", {"verbs": ["create"], "resources": ["pods/eviction"], "status": 409,
                                       "count": 1})
    try:
        # Read as "evicted", the reschedule rung would wait for a replacement that never comes.
        with pytest.raises(Conflict):
            run_on_loop(kube, kube.aio.try_evict("default", "evict-409", uid))
        assert kube.get_pod("default", "evict-409") is not None
        # The UID precondition names a pod replaced since: gone, as far as this eviction goes.
        assert run_on_loop(kube, kube.aio.try_evict("default", "evict-409", "uid-of-a-replaced-pod")) is None
        assert run_on_loop(kube, kube.aio.try_evict("default", "evict-409", uid)) is None
        pod = kube.get_pod("default", "evict-409")
        assert pod is None or pod["metadata"].get("deletionTimestamp")
    finally:
        raw("DELETE", "/sim/v1/faults/api")
        kube.close()
