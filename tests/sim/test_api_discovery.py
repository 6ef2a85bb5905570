"""Discovery endpoints and the kubeconfig, as the client loads them."""

from __future__ import annotations

from kubernetes import client, config

from podmedic_sim import SimCluster
from tests.sim.conftest import Raw, kubeconfig_of


def test_load_kube_config_and_version(sim: SimCluster) -> None:
    configuration = client.Configuration()
    config.load_kube_config(str(kubeconfig_of(sim)), client_configuration=configuration)
    assert configuration.host == sim.url
    with client.ApiClient(configuration) as api:
        info = client.VersionApi(api).get_code()
        assert (info.major, info.minor) == ("1", "37")
        groups = client.ApisApi(api).get_api_versions()
        names = {g.name for g in groups.groups}
        assert {"resource.k8s.io", "batch", "policy"} <= names


def test_resource_lists(raw: Raw) -> None:
    status, core = raw("GET", "/api/v1")
    assert status == 200
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["namespaced"] and not by_name["nodes"]["namespaced"]
    assert "pods/eviction" in by_name and "pods/status" in by_name
    status, dra = raw("GET", "/apis/resource.k8s.io/v1")
    assert {r["name"] for r in dra["resources"]} >= {
        "deviceclasses",
        "resourceslices",
        "resourceclaims",
        "resourceclaimtemplates",
        "devicetaintrules",
        "devicetaintrules/status",
    }
    assert raw("GET", "/api")[1]["versions"] == ["v1"]
    assert raw("GET", "/apis/resource.k8s.io/v9")[0] == 404
