"""A shared API server's throttling, and podmedic's light touch on it.

The server side's shape is upstream's (kubernetes/kubernetes
staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go and
util/flowcontrol/dropped_requests_tracker.go): 429, a plain-text body from ``http.Error``, a
``Retry-After`` that starts at 1 s and doubles while drops go on, and the
``X-Kubernetes-PF-*-UID`` headers. The client side is client-go's (util/flowcontrol/throttle.go's
token bucket; rest/request.go retrying a 429 with ``Retry-After``).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.helpers import run_on_loop
from tests.sim.conftest import pod_manifest


@pytest.fixture(scope="module")
def sim(unaudited_sim: SimCluster) -> SimCluster:
    """Its gateways speak as components of their own (budgets are per user): kept out of the RBAC proof."""
    return unaudited_sim


def _flow(sim: SimCluster, body: dict[str, Any] | None = None) -> dict[str, Any]:
    req = urllib.request.Request(f"{sim.url}/sim/v1/flow-control", method="POST" if body is not None else "GET",
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        state: dict[str, Any] = json.loads(resp.read())
        return state


def _get(sim: SimCluster, agent: str) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(f"{sim.url}/api/v1/namespaces/default/pods", headers={"User-Agent": agent})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def test_a_spent_budget_is_answered_as_apf_answers(sim: SimCluster) -> None:
    _flow(sim, {"qps": 1, "burst": 2})
    try:
        answers = [_get(sim, "tool-a/1") for _ in range(3)]
        assert [a[0] for a in answers] == [200, 200, 429]
        _, headers, body = answers[2]
        assert body == "Too many requests, please try again later.\n"
        assert headers["Content-Type"].startswith("text/plain")
        assert headers["Retry-After"] == "1"
        assert headers["X-Kubernetes-PF-FlowSchema-UID"] and headers["X-Kubernetes-PF-PriorityLevel-UID"]
        assert _get(sim, "tool-b/1")[0] == 200  # another user: its own budget
        time.sleep(1.05)  # a second with drops after a second with drops: Retry-After doubles
        seen = [_get(sim, "tool-a/1") for _ in range(3)]
        assert any(a[0] == 429 and a[1]["Retry-After"] == "2" for a in seen), [a[:2] for a in seen]
        assert _flow(sim)["users"]["tool-a"]["dropped"] >= 2
    finally:
        _flow(sim, {"qps": None})


def test_the_gateway_waits_out_retry_after_and_every_write_succeeds(sim: SimCluster) -> None:
    # Writes: urllib3 itself already waits out Retry-After for reads (GET is idempotent), never for a PATCH.
    # One request a second, so the client must wait as told; APF refused each before acting, so retrying is safe.
    node = next(iter(sim.store.iter("nodes", None)))["metadata"]["name"]
    _flow(sim, {"qps": 1, "burst": 1})
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)), qps=0, burst=1).for_component("apftest")
    try:
        started = time.monotonic()
        for n in range(4):
            gateway.patch_node(node, {"metadata": {"annotations": {"test.podmedic.io/apf": str(n)}}})
        elapsed = time.monotonic() - started
    finally:
        gateway.close()
        state = _flow(sim)["users"]["podmedic-apftest"]
        _flow(sim, {"qps": None})
    assert state["dropped"] > 0, state  # the server throttled ...
    assert state["admitted"] == 4 and elapsed >= 3.0  # ... and each write got through after Retry-After
    assert sim.store.get("nodes", None, node)["metadata"]["annotations"]["test.podmedic.io/apf"] == "3"


def test_the_client_side_limit_keeps_under_the_servers_budget(sim: SimCluster) -> None:
    _flow(sim, {"qps": 12, "burst": 6})
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)), qps=10, burst=5).for_component("polite")
    try:
        started = time.monotonic()
        for _ in range(35):
            run_on_loop(gateway, gateway.aio.list_pods("default", ""))
        elapsed = time.monotonic() - started
    finally:
        gateway.close()
        state = _flow(sim)["users"]["podmedic-polite"]
        _flow(sim, {"qps": None})
    assert state["dropped"] == 0, state  # never throttled: it never asked for more than it was given
    assert state["max_per_second"] <= 10 + 5, state
    assert elapsed >= (35 - 5) / 10 - 0.2  # the bucket, not the server, paced it


def test_an_eviction_refused_by_a_budget_is_not_waited_out(sim: SimCluster) -> None:
    # Its 429 carries Retry-After: 10 too, but it is a PodDisruptionBudget's refusal, not throttling.
    from podmedic.kube.throttle import throttle_wait

    body = json.dumps({"kind": "Status", "code": 429, "reason": "TooManyRequests", "details": {
        "causes": [{"reason": "DisruptionBudget", "message": "The disruption budget pdb needs 1 healthy pods"}]}})
    assert throttle_wait(429, {"Retry-After": "10"}, body) is None
    assert throttle_wait(429, {"Retry-After": "3"}, "Too many requests, please try again later.\n") == 3.0
    assert throttle_wait(429, {}, "") is None and throttle_wait(503, {"Retry-After": "1"}, "") is None


def test_every_request_the_server_saw_took_a_token(sim: SimCluster) -> None:
    # urllib3's default Retry sends a GET again by itself after a 429 with Retry-After, past the
    # client's limiter; client-go's limiter is in front of every try (rest/request.go, tryThrottle).
    _flow(sim, {"qps": 1, "burst": 1})
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)), qps=0, burst=1).for_component("counted")
    try:
        for _ in range(3):
            run_on_loop(gateway, gateway.aio.list_pods("default", ""))
    finally:
        gateway.close()
        state = _flow(sim)["users"]["podmedic-counted"]
        _flow(sim, {"qps": None})
    assert state["dropped"] > 0, state  # it was throttled, so there were tries again ...
    assert state["admitted"] + state["dropped"] == gateway.limiter.taken, state  # ... each one counted


def test_an_eviction_throttled_by_the_server_is_waited_out_not_read_as_a_budget(
        sim: SimCluster, api: client.ApiClient, ns: str) -> None:
    # APF's 429 is plain text with Retry-After (priority-and-fairness.go); a PDB's is a Status whose
    # causes name DisruptionBudget (pkg/registry/core/pod/storage/eviction.go).
    client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest("apf-evict"))
    uid = client.CoreV1Api(api).read_namespaced_pod("apf-evict", ns).metadata.uid
    _flow(sim, {"qps": 1, "burst": 1})
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)), qps=0, burst=1).for_component("evictor")
    try:
        run_on_loop(gateway, gateway.aio.list_pods(ns, ""))  # spends the second's budget: the eviction meets a 429
        refused = run_on_loop(gateway, gateway.aio.try_evict(ns, "apf-evict", uid))
    finally:
        gateway.close()
        state = _flow(sim)["users"]["podmedic-evictor"]
        _flow(sim, {"qps": None})
    assert refused is None, refused
    assert state["dropped"] > 0, state
    left = [p for p in sim.store.iter("pods", ns) if p["metadata"]["name"] == "apf-evict"]
    assert not left or left[0]["metadata"].get("deletionTimestamp"), left  # evicted
