"""The worker's ResourceClaim and DeviceTaintRule caches against the simulator over HTTP.

Both are the pod cache's reflector (``podmedic/kube/reflector.py``; the shape is client-go's
``tools/cache/reflector.go``) over another kind. What these tests hold them to: a claim or rule the
watch has seen is read without a request; a write over a cached version the API server has moved
past is refused with 409 Conflict (a delete's ``preconditions.resourceVersion``, apimachinery's
``metav1.Preconditions``), and the caller then reads the API server's version and decides again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from activities.taint import TaintActivities
from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_recovery import Effect
from podmedic.domain.steps import TaintInput
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from podmedic_sim.audit import UNSCOPED
from tests.helpers import wait_until
from tests.ingest_sources.conftest import start_pod


@pytest.fixture
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    """A gateway whose claim and rule reads the caches answer (their watches say they are the worker's;
    the reads the caches cannot answer are unscoped)."""
    gateway = KubeGateway(Path(str(sim.kubeconfig_path)))
    gateway.start_caches("worker", watch_timeout_s=5)
    claims, rules = gateway.claims, gateway.rules
    assert claims is not None and rules is not None
    wait_until(lambda: claims.current and rules.current, what="the claim and rule caches listed and watching")
    yield gateway
    gateway.close()


def _requests(sim: SimCluster, verb: str, resource: str, status: int | None = None) -> int:
    return sum(int(e["count"]) for e in sim.ledger.entries()  # type: ignore[call-overload]
               if e["verb"] == verb and e["resource"] == resource and e["component"] == UNSCOPED
               and (status is None or e["status"] == status))


def _device(pod: dict[str, object]) -> DeviceRef:
    driver, pool, device = str(pod["devices"][0]).split("/")  # type: ignore[index]
    return DeviceRef(driver=driver, pool=pool, device=device)


def test_a_claim_the_watch_saw_is_read_without_a_request(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    pod = start_pod(sim, api)
    live = client.CoreV1Api(api).read_namespaced_pod(pod["name"], "default")
    name = live.status.resource_claim_statuses[0].resource_claim_name
    assert kube.claims is not None
    wait_until(lambda: kube.claims.get("default", name), what="the claim in the cache")  # type: ignore[union-attr]
    gets = _requests(sim, "get", "resourceclaims")
    claim = kube.get_claim("default", name)
    assert claim is not None and claim["status"]["allocation"]["devices"]["results"]
    assert _requests(sim, "get", "resourceclaims") == gets
    assert kube.get_claim("default", "no-such-claim") is None  # not held: asked, and not found
    assert _requests(sim, "get", "resourceclaims") == gets + 1


async def test_a_rule_is_released_over_the_cached_version(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway) -> None:
    pod = start_pod(sim, api)
    taint = TaintActivities(kube)
    made = await taint.ensure(TaintInput(incident_id="i-1", device=_device(pod), effect=Effect.NO_SCHEDULE,
                                         reason="test"), holder="run-1")
    assert kube.rules is not None
    wait_until(lambda: kube.rules.get("", made.rule_name), what="the rule in the cache")  # type: ignore[union-attr]
    gets = _requests(sim, "get", "devicetaintrules")
    done = await taint.release(made.rule_name, "run-1", "healed")
    assert done.removed and _requests(sim, "get", "devicetaintrules") == gets
    assert kube.get_taint_rule(made.rule_name, fresh=True) is None


async def test_a_release_over_a_stale_cached_version_reads_again_and_deletes(
        sim: SimCluster, api: client.ApiClient, kube: KubeGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    pod = start_pod(sim, api)
    taint = TaintActivities(kube)
    made = await taint.ensure(TaintInput(incident_id="i-2", device=_device(pod), effect=Effect.NO_SCHEDULE,
                                         reason="test"), holder="run-2")
    # The eviction controller writes the rule's EvictionInProgress condition (KEP-5055) once, soon after it is
    # made: a write that would refuse one more delete if it landed between the test's read and the release.
    stale = wait_until(lambda: (r := kube.get_taint_rule(made.rule_name, fresh=True)) and (r.get("status") or {})
                       .get("conditions") and r, what="the eviction controller's condition on the rule")
    # Another writer moves the rule on; the cache is made to answer the version before (a watch behind).
    client.ResourceV1Api(api).patch_device_taint_rule(made.rule_name, {"metadata": {"labels": {"seen": "yes"}}})
    assert kube.rules is not None
    monkeypatch.setattr(kube.rules, "get", lambda namespace, name: stale)
    gets, refused = _requests(sim, "get", "devicetaintrules"), _requests(sim, "delete", "devicetaintrules", 409)
    done = await taint.release(made.rule_name, "run-2", "healed")
    assert done.removed
    assert _requests(sim, "delete", "devicetaintrules", 409) == refused + 1  # the stale version was refused
    assert _requests(sim, "get", "devicetaintrules") == gets + 1  # then read from the API server
    assert kube.get_taint_rule(made.rule_name, fresh=True) is None
