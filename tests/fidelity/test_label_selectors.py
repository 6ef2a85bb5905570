"""Label selectors with ``>`` and ``<``, as kubectl sends them and the API server parses them.

Source: k8s.io/apimachinery ``pkg/labels/selector.go`` (``Parse``: operators ``>`` and ``<`` are
``selection.GreaterThan``/``LessThan``; ``NewRequirement``: exactly one value, an integer; a label that
is missing or not an integer does not match).
"""

from __future__ import annotations

from kubernetes import client

from tests.fidelity.conftest import Kubectl
from tests.sim.conftest import pod_manifest


def test_greater_and_less_than_compare_integer_labels(api: client.ApiClient, ns: str, kubectl: Kubectl) -> None:
    v1 = client.CoreV1Api(api)
    for name, gen in (("one", "1"), ("two", "2"), ("three", "3"), ("word", "x")):
        v1.create_namespaced_pod(ns, pod_manifest(name, labels={"gen": gen}))

    def names(selector: str) -> list[str]:
        out = kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "name", check=True).stdout
        return sorted(line.removeprefix("pod/") for line in out.split())

    assert names("gen>1") == ["three", "two"]
    assert names("gen<2") == ["one"]
    assert names("gen>1,gen<3") == ["two"]
    refused = kubectl("get", "pods", "-n", ns, "-l", "gen>x")
    assert refused.returncode != 0 and "must be an integer" in refused.stderr, refused.stderr
