"""API fault injection over HTTP and through ``SimCluster``."""

from __future__ import annotations

import concurrent.futures
import time

import pytest
from kubernetes import client

from podmedic_sim import SimCluster
from tests.sim.conftest import Raw


def test_http_fault_with_count(api: client.ApiClient, raw: Raw) -> None:
    status, body = raw(
        "POST",
        "/sim/v1/faults/api",
        {"verbs": ["list"], "resources": ["nodes"], "status": 503, "count": 2},
    )
    assert status == 201 and len(body["active"]) == 1
    v1 = client.CoreV1Api(api)
    try:
        for _ in range(2):
            with pytest.raises(client.ApiException) as err:
                v1.list_node()
            assert err.value.status == 503 and "injected" in err.value.body
        v1.read_namespace("default")  # other verbs/resources untouched
        assert v1.list_node().items
    finally:
        raw("DELETE", "/sim/v1/faults/api")


def test_python_fault_latency_and_clear(api: client.ApiClient, sim: SimCluster) -> None:
    v1 = client.CoreV1Api(api)
    sim.add_api_fault(verbs=["get"], resources=["namespaces"], latency_ms=300)
    try:
        start = time.monotonic()
        v1.read_namespace("default")
        assert time.monotonic() - start >= 0.28
        sim.add_api_fault(verbs=["patch"], status=429)
        with pytest.raises(client.ApiException) as err:
            v1.patch_namespace("default", {"metadata": {"labels": {"x": "y"}}})
        assert err.value.status == 429 and err.value.headers["Retry-After"] == "1"
    finally:
        sim.clear_api_faults()
    # Cleared: no rule left, and the write refused with 429 a moment ago goes through (a wall-clock bound
    # on the read would flake on a loaded machine; the latency above is a lower bound, which load cannot break).
    assert sim.call(sim.faults.active) == []
    assert v1.patch_namespace("default", {"metadata": {"labels": {"x": "y"}}}).metadata.labels["x"] == "y"


def test_fault_duration_expires(api: client.ApiClient, raw: Raw) -> None:
    raw("POST", "/sim/v1/faults/api", {"status": 500, "duration_s": 0.3, "resources": ["events"]})
    v1 = client.CoreV1Api(api)
    with pytest.raises(client.ApiException) as err:
        v1.list_event_for_all_namespaces()
    assert err.value.status == 500
    time.sleep(0.35)
    v1.list_event_for_all_namespaces()


def test_bad_fault_rule_is_400(raw: Raw) -> None:
    status, _ = raw("POST", "/sim/v1/faults/api", {"status": 418})
    assert status == 400
    status, _ = raw("POST", "/sim/v1/faults/api", {"probability": 2})
    assert status == 400
    assert raw("GET", "/sim/v1/faults/api")[1]["active"] == []


def test_a_hold_rule_keeps_the_call_in_flight_until_cleared_then_serves_it(api: client.ApiClient, raw: Raw) -> None:
    v1 = client.CoreV1Api(api)
    raw("POST", "/sim/v1/faults/api", {"verbs": ["patch"], "resources": ["namespaces"], "hold": True})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            call = pool.submit(v1.patch_namespace, "default", {"metadata": {"labels": {"held": "yes"}}})
            deadline = time.monotonic() + 30
            while raw("GET", "/sim/v1/faults/api")[1]["held"] != 1:
                assert time.monotonic() < deadline, "the patch never reached the simulator"
                time.sleep(0.02)
            assert not call.done(), "a held call is not answered"
            assert "held" not in (v1.read_namespace("default").metadata.labels or {}), "nor applied yet"
        finally:
            raw("DELETE", "/sim/v1/faults/api")
        assert call.result(timeout=30).metadata.labels["held"] == "yes", "served once the rules are cleared"
    assert raw("GET", "/sim/v1/faults/api")[1] == {"active": [], "held": 0}
