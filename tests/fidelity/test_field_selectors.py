"""Field selectors are per kind and few, and anything else is a 400 (what a real API server does).

Sources: kubernetes/kubernetes ``pkg/apis/core/v1/conversion.go`` (pods: ``spec.nodeName``,
``status.phase``, ...; nodes: ``spec.unschedulable``; events: ``involvedObject.*``, ``reason``, ``type``),
kubernetes/api ``resource/v1/types.go`` (``ResourceSliceSelectorName``, ``...NodeName``, ``...Driver``)
with ``pkg/apis/resource/v1/conversion.go``, and apimachinery's ``DefaultMetaV1FieldSelectorConversion``
for kinds with no conversion function of their own (ResourceClaim, DeviceTaintRule): ``metadata.name``
and ``metadata.namespace`` only.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

SUPPORTED = [
    ("list_pod_for_all_namespaces", client.CoreV1Api, "spec.nodeName=node-0000,status.phase=Running"),
    ("list_node", client.CoreV1Api, "spec.unschedulable=false,metadata.name=node-0000"),
    ("list_event_for_all_namespaces", client.CoreV1Api, "involvedObject.kind=Pod,reason=Started,type=Normal"),
    ("list_resource_slice", client.ResourceV1Api, "spec.driver=gpu.nvidia.com,spec.nodeName=node-0000"),
    ("list_resource_claim_for_all_namespaces", client.ResourceV1Api, "metadata.namespace=default"),
    ("list_device_taint_rule", client.ResourceV1Api, "metadata.name=x"),
]

REFUSED = [
    ("list_resource_slice", client.ResourceV1Api, "spec.pool.name=node-0000"),
    ("list_device_taint_rule", client.ResourceV1Api, "spec.deviceSelector.device=gpu-0"),
    ("list_resource_claim_for_all_namespaces", client.ResourceV1Api, "status.allocation=x"),
    ("list_node", client.CoreV1Api, "spec.nodeName=node-0000"),
    ("list_pod_for_all_namespaces", client.CoreV1Api, "spec.nodeSelector=x"),
]


@pytest.mark.parametrize(("call", "api_class", "selector"), SUPPORTED, ids=[c[2] for c in SUPPORTED])
def test_supported_field_selectors_are_served(api: client.ApiClient, call: str, api_class: type,
                                              selector: str) -> None:
    getattr(api_class(api), call)(field_selector=selector)


@pytest.mark.parametrize(("call", "api_class", "selector"), REFUSED, ids=[c[2] for c in REFUSED])
def test_other_field_selectors_are_a_bad_request(api: client.ApiClient, call: str, api_class: type,
                                                 selector: str) -> None:
    with pytest.raises(ApiException) as refused:
        getattr(api_class(api), call)(field_selector=selector)
    assert refused.value.status == 400
    assert selector.split("=")[0] in str(refused.value.body)
