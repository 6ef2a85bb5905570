"""podmedic installed from deploy/ on a real cluster: it runs, its RBAC is what the proof says, and
a device fault becomes a DeviceTaintRule. Run by deploy/kind/e2e.sh."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from kubernetes import client

pytestmark = pytest.mark.e2e
NS = "podmedic"


def _can(api: Any, sa: str, verb: str, resource: str, group: str = "", sub: str = "") -> bool:
    review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user=f"system:serviceaccount:{NS}:{sa}",
        resource_attributes=client.V1ResourceAttributes(verb=verb, resource=resource, group=group, subresource=sub)))
    return bool(client.AuthorizationV1Api(api).create_subject_access_review(review).status.allowed)


def test_worker_and_ingest_are_available(api: Any) -> None:
    apps = client.AppsV1Api(api)
    for name in ("podmedic-worker", "podmedic-ingest"):
        status = apps.read_namespaced_deployment(name, NS).status
        assert (status.available_replicas or 0) >= 1, (name, status)


def test_service_accounts_have_exactly_their_roles(api: Any) -> None:
    assert _can(api, "podmedic-worker", "create", "devicetaintrules", "resource.k8s.io")
    assert _can(api, "podmedic-worker", "create", "pods", sub="eviction")
    assert not _can(api, "podmedic-worker", "delete", "nodes")
    assert not _can(api, "podmedic-worker", "get", "secrets")
    assert _can(api, "podmedic-ingest", "watch", "pods")
    assert not _can(api, "podmedic-ingest", "patch", "pods")
    assert not _can(api, "podmedic-agent", "list", "pods")


def test_unhealthy_device_gets_a_taint_rule(api: Any, core: Any) -> None:
    """The fault is a device taint in the driver's ResourceSlice, as drivers publish it."""
    driver, pool, device = (os.environ[f"PODMEDIC_E2E_{k}"] for k in ("DRIVER", "POOL", "DEVICE"))
    resource = client.ResourceV1Api(api)
    # No API server selects ResourceSlices by pool name (kubernetes/api resource/v1 ResourceSliceSelector*).
    slices = [s for s in resource.list_resource_slice(field_selector=f"spec.driver={driver}").items
              if s.spec.pool.name == pool]
    target = next(s for s in slices if any(d.name == device for d in s.spec.devices))
    body = target.to_dict()
    for d in body["spec"]["devices"]:
        if d["name"] == device:
            d["taints"] = [{"key": f"{driver}/xid", "value": "79", "effect": "NoSchedule"}]
    resource.replace_resource_slice(target.metadata.name, body)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        rules = [r for r in resource.list_device_taint_rule().items
                 if r.spec.device_selector.device == device and r.spec.device_selector.pool == pool]
        if rules:
            assert rules[0].spec.taint.key == "podmedic.io/unhealthy"
            return
        time.sleep(2)
    pytest.fail(f"no DeviceTaintRule for {driver}/{pool}/{device} within 180 s")
