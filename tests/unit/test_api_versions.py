"""Choosing the DeviceTaintRule version from discovery answers shaped as the API server's.

Upstream: ``GET /apis/resource.k8s.io`` lists the served versions (APIGroup ``versions``), and
``GET /apis/resource.k8s.io/<version>`` the resources of one (APIResourceList). DeviceTaintRule is
in v1alpha3 (1.35), v1beta2 (1.36) and v1 (1.37) (KEP-5055).
"""

from __future__ import annotations

from podmedic.kube.api_versions import choose, health_status_note


def test_the_newest_version_with_devicetaintrules_wins() -> None:
    served = ["v1", "v1beta2", "v1beta1", "v1alpha3"]
    resources = {"v1": ["deviceclasses", "resourceclaims", "resourceslices"],  # 1.36: no taint rules in v1 yet
                 "v1beta2": ["deviceclasses", "devicetaintrules", "devicetaintrules/status"],
                 "v1alpha3": ["devicetaintrules"]}
    found = choose(served, resources)
    assert found.version == "v1beta2" and found.api_version == "resource.k8s.io/v1beta2"
    assert found.describe() == "DeviceTaintRule: resource.k8s.io/v1beta2"


def test_none_served_names_the_gate_and_what_podmedic_does_instead() -> None:
    found = choose(["v1"], {"v1": ["deviceclasses", "resourceclaims"]})
    assert found.version is None
    line = found.describe()
    assert "DRADeviceTaints" in line and "resource.k8s.io versions: v1" in line and "quarantine the whole node" in line
    assert "\n" not in line


def test_a_cluster_without_the_resource_group() -> None:
    assert choose([], {}).describe().startswith("DeviceTaintRule is not served by this cluster (resource.k8s.io "
                                               "versions: none)")


def test_pod_status_health_needs_a_gate_before_1_36() -> None:
    """ResourceHealthStatus: alpha from 1.31, beta and on by default from 1.36 (feature-gates docs).
    ``minor`` is a string, with a ``+`` on some distributions' builds (GET /version, version.Info)."""
    assert health_status_note({"major": "1", "minor": "37"}) is None
    assert health_status_note({"major": "1", "minor": "36+"}) is None
    note = health_status_note({"major": "1", "minor": "35"})
    assert note is not None and "ResourceHealthStatus" in note and "Kubernetes 1.35" in note
    assert health_status_note({"major": "one", "minor": "x"}) is None  # unreadable: no claim made
