"""Property: malformed requests never crash the API server nor corrupt its state."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from tests.sim.conftest import Raw, pod_manifest

SAFE_NS = "fuzz-safe"
PATHS = [
    "/api",
    "/apis",
    "/api/v1",
    "/version",
    "/apis/resource.k8s.io/v1",
    "/api/v1/namespaces/{ns}/pods",
    "/api/v1/namespaces/{ns}/pods/{name}",
    "/api/v1/namespaces/{ns}/pods/{name}/status",
    "/api/v1/namespaces/{ns}/pods/{name}/eviction",
    "/api/v1/namespaces/{ns}/pods/{name}/{junk}",
    "/api/v1/pods",
    "/api/v1/nodes/{name}",
    "/api/v1/nodes/{name}/status",
    "/api/v1/namespaces/{ns}/events",
    "/api/v1/namespaces/{ns}",
    "/apis/resource.k8s.io/v1/devicetaintrules/{name}",
    "/apis/resource.k8s.io/v1/devicetaintrules",
    "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}/status",
    "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
    "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "/apis/{junk}/{junk}/{junk}",
    "/{junk}",
    "/api/v1/{junk}/{junk}/{junk}/{junk}/{junk}",
]
CTYPES = [
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "text/html",
    "",
    "application/json; charset=utf-8",
]
QUERY_KEYS = [
    "watch",
    "labelSelector",
    "fieldSelector",
    "resourceVersion",
    "limit",
    "continue",
    "dryRun",
    "timeoutSeconds",
    "gracePeriodSeconds",
    "propagationPolicy",
    "junk",
]

segment = st.text(st.characters(codec="ascii", exclude_characters="/?#%"), min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["none", "json", "bytes", "pod"]))
    if kind == "none":
        return None
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "pod":
        pod: dict[str, Any] = pod_manifest(draw(segment).lower())
        pod["spec"] = draw(st.one_of(json_values, st.just(pod["spec"])))
        return json.dumps(pod).encode()
    return json.dumps(draw(json_values)).encode()


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes | None, str]:
    template = draw(st.sampled_from(PATHS))
    path = template.format(
        ns=draw(st.sampled_from(["default", "fuzz", "nope"])),
        name=urllib.parse.quote(
            draw(st.sampled_from(["x", "node-0000", "canary-is-elsewhere"]) | segment), safe=""
        ),
        junk=urllib.parse.quote(draw(segment), safe=""),
    )
    query = draw(st.dictionaries(st.sampled_from(QUERY_KEYS), st.text(max_size=10), max_size=3))
    if query.get("watch"):
        query["timeoutSeconds"] = "1"
    if query:
        path += "?" + urllib.parse.urlencode(query)
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]))
    return method, path, draw(bodies()), draw(st.sampled_from(CTYPES))


def test_fuzzed_requests_never_crash_nor_corrupt(api: client.ApiClient, raw: Raw) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SAFE_NS}})
    v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fuzz"}})
    # An Event: no simulated controller touches it, so any change would be corruption.
    canary = v1.create_namespaced_event(
        SAFE_NS,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "canary", "labels": {"k": "v"}},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": SAFE_NS},
            "reason": "Canary",
            "message": "must survive the fuzzing",
            "type": "Normal",
        },
    )
    canary_raw = raw("GET", f"/api/v1/namespaces/{SAFE_NS}/events/canary")[1]
    last_rv = [int(canary.metadata.resource_version)]

    @settings(
        max_examples=250,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(requests())
    def one(req: tuple[str, str, bytes | None, str]) -> None:
        method, path, body, ctype = req
        status, resp = raw(method, path, body, ctype)
        assert status < 500, (req, status, resp)
        rv = int(raw("GET", "/api/v1/namespaces/default/pods")[1]["metadata"]["resourceVersion"])
        assert rv >= last_rv[0]
        last_rv[0] = rv

    one()
    assert raw("GET", f"/api/v1/namespaces/{SAFE_NS}/events/canary")[1] == canary_raw
