"""DeviceTaintRules as the API server validates them (KEP-5055).

Source: kubernetes/kubernetes pkg/apis/resource/validation/validation.go,
``validateDeviceTaintSelector``: the selector's driver is a CSI driver name
(``corevalidation.ValidateCSIDriverName``: a DNS subdomain of at most 63 characters, upper case
allowed), its pool one or more DNS subdomains joined by ``/`` (``validatePoolName``), its device a
DNS label (``ValidateDNS1123Label``); the taint's effect is one of None, NoSchedule, NoExecute.

``timeAdded``: pkg/apis/resource/v1/defaults.go ``SetDefaults_DeviceTaint`` (a taint without one gets the
time it is written, in whole seconds) and pkg/registry/resource/devicetaintrule/strategy.go
``PrepareForUpdate`` (an effect changed with ``timeAdded`` left as it was gets the time of the change,
so tolerationSeconds count from the NoExecute, not from the NoSchedule before it).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from kubernetes import client

from podmedic.domain.models import DeviceRef


def _rule(name: str, driver: str, pool: str, device: str, effect: str = "NoSchedule") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device},
                     "taint": {"key": "example.com/fidelity", "value": "x", "effect": effect}}}


@pytest.mark.parametrize(("driver", "pool", "device", "field"), [
    ("gpu.example.com", "node-1", "GPU_0", "spec.deviceSelector.device"),
    ("gpu.example.com", "node_1", "gpu-0", "spec.deviceSelector.pool"),
    ("gpu_example.com", "node-1", "gpu-0", "spec.deviceSelector.driver"),
])
def test_a_selector_name_the_server_refuses(api: client.ApiClient, driver: str, pool: str, device: str,
                                            field: str) -> None:
    with pytest.raises(client.ApiException) as err:
        client.ResourceV1Api(api).create_device_taint_rule(_rule("fidelity-bad", driver, pool, device))
    assert err.value.status == 422 and f'"field":"{field}"' in err.value.body.replace(" ", "")
    # podmedic refuses the same name where it enters, so it never gets as far as a rule.
    with pytest.raises(ValueError, match="should match pattern"):
        DeviceRef(driver=driver, pool=pool, device=device)


def test_names_the_server_accepts(api: client.ApiClient) -> None:
    rules = client.ResourceV1Api(api)
    created = rules.create_device_taint_rule(_rule("fidelity-good", "GPU.example.com", "rack-1/node-1", "gpu-0"))
    try:
        assert created.spec.device_selector.pool == "rack-1/node-1"
        assert DeviceRef.parse("GPU.example.com/rack-1/node-1/gpu-0").pool == "rack-1/node-1"
    finally:
        rules.delete_device_taint_rule("fidelity-good")


def _time(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def test_time_added_is_defaulted_and_moves_when_the_effect_changes(api: client.ApiClient) -> None:
    rules = client.ResourceV1Api(api)
    name = f"fidelity-time-{time.monotonic_ns()}"
    created = rules.create_device_taint_rule(_rule(name, "gpu.example.com", "node-1", "gpu-0"))
    try:
        first = created.spec.taint.time_added
        assert first is not None, "a taint without timeAdded gets the time of its creation"
        time.sleep(1.1)  # timeAdded has whole seconds: a change within the same second could not show
        body = {"spec": {"taint": {"effect": "NoExecute"}}}
        raised = rules.patch_device_taint_rule(name, body)
        assert raised.spec.taint.time_added > first, "the effect changed and timeAdded was left: it moves"
        kept = rules.patch_device_taint_rule(name, {"spec": {"taint": {"value": "y"}}})
        assert kept.spec.taint.time_added == raised.spec.taint.time_added, "another change leaves it"
        chosen = "2020-01-02T03:04:05Z"
        lowered = rules.patch_device_taint_rule(
            name, {"spec": {"taint": {"effect": "NoSchedule", "timeAdded": chosen}}})
        assert lowered.spec.taint.time_added == _time(chosen), "a time the client changes itself is kept"
    finally:
        rules.delete_device_taint_rule(name)
