"""Discovery as the API server answers it, which podmedic reads to find DeviceTaintRule.

Upstream: staging/src/k8s.io/apiserver/pkg/endpoints/discovery (``/apis/<group>`` answers an
APIGroup, ``/apis/<group>/<version>`` an APIResourceList; the generated Python client asks for
both paths with a trailing slash, which the server serves the same). KEP-5055: DeviceTaintRule
is in resource.k8s.io v1alpha3 (1.35), v1beta2 (1.36) and v1 (1.37).
"""

from __future__ import annotations

from kubernetes import client

from podmedic.kube.api_versions import TAINT_RULE_VERSIONS


def test_the_resource_group_lists_its_versions_and_the_preferred_one(api: client.ApiClient) -> None:
    group = client.ResourceApi(api).get_api_group()  # GET /apis/resource.k8s.io/
    versions = [v.version for v in group.versions]
    assert "v1" in versions and group.preferred_version.version in versions


def test_a_version_lists_its_resources_and_devicetaintrules_is_in_one_of_them(api: client.ApiClient) -> None:
    group = client.ResourceApi(api).get_api_group()
    served = {}
    for version in [v.version for v in group.versions if v.version in TAINT_RULE_VERSIONS]:
        listing = getattr(client, f"Resource{version.capitalize()}Api")(api).get_api_resources()
        served[version] = {r.name for r in listing.resources}
    assert "resourceclaims" in served["v1"] and "resourceslices" in served["v1"]
    assert any("devicetaintrules" in names for names in served.values()), served
