"""DeviceTaintRules as the API server validates them (KEP-5055).

Source: kubernetes/kubernetes pkg/apis/resource/validation/validation.go,
``validateDeviceTaintSelector``: the selector's driver is a CSI driver name
(``corevalidation.ValidateCSIDriverName``: a DNS subdomain of at most 63 characters, upper case
allowed), its pool one or more DNS subdomains joined by ``/`` (``validatePoolName``), its device a
DNS label (``ValidateDNS1123Label``); the taint's effect is one of None, NoSchedule, NoExecute.
"""

from __future__ import annotations

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
