"""Property: malformed requests never crash the API server nor corrupt its state.

The canary (an Event no simulated controller touches) is a reachable target: the generated requests
name its namespace and its name, so a request may address it. A refused request, or one that only
reads, must leave it as it was; only an accepted write to it may change it. The seed varies per run
and is printed (``PODMEDIC_FUZZ_SEED=<seed>`` replays a failure).
"""

from __future__ import annotations

import json
import os
import random
import urllib.parse
from typing import Any

from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from kubernetes import client

from tests.sim.conftest import Raw, pod_manifest

SAFE_NS = "fuzz-safe"
CANARY = "canary"
READS = frozenset({"GET", "HEAD", "OPTIONS"})
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
    "/api/v1/namespaces/{ns}/events/{name}",
    "/api/v1/namespaces/fuzz-safe/events/canary",  # the canary itself, often enough to be hit every run
    "/api/v1/namespaces/fuzz-safe/events/canary",
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
        ns=draw(st.sampled_from(["default", "fuzz", "nope", SAFE_NS])),
        name=urllib.parse.quote(
            draw(st.sampled_from(["x", "node-0000", CANARY]) | segment), safe=""
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


class Canary:
    """The canary Event in ``fuzz-safe``: served as it is now, made again if an accepted DELETE removed it."""

    path = f"/api/v1/namespaces/{SAFE_NS}/events/{CANARY}"

    def __init__(self, v1: client.CoreV1Api, raw: Raw) -> None:
        self.v1, self.raw = v1, raw
        for ns in (SAFE_NS, "fuzz"):
            if raw("GET", f"/api/v1/namespaces/{ns}")[0] == 404:  # the simulator is shared by the module
                v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def now(self) -> Any:
        status, found = self.raw("GET", self.path)
        if status == 404:
            # An Event: no simulated controller touches it, so any change but an accepted write is corruption.
            self.v1.create_namespaced_event(SAFE_NS, {
                "apiVersion": "v1", "kind": "Event", "metadata": {"name": CANARY, "labels": {"k": "v"}},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": SAFE_NS}, "reason": "Canary",
                "message": "must survive the fuzzing", "type": "Normal"})
            status, found = self.raw("GET", self.path)
        assert status == 200, found
        return found


def _seed() -> int:
    run_seed = int(os.environ.get("PODMEDIC_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
    print(f"fuzz seed {run_seed} (replay: PODMEDIC_FUZZ_SEED={run_seed})")
    return run_seed


def test_fuzzed_requests_never_crash_nor_corrupt(api: client.ApiClient, raw: Raw) -> None:
    canary = Canary(client.CoreV1Api(api), raw)
    last_rv = [int(canary.now()["metadata"]["resourceVersion"])]
    run_seed = _seed()
    reached: list[str] = []  # requests that addressed the canary itself

    # Two requests at the canary always run (a CI run once drew none of its own in 250): a read, and a
    # write it must refuse without a change.
    @example(("GET", f"/api/v1/namespaces/{SAFE_NS}/events/{CANARY}", None, ""))
    @example(("PATCH", f"/api/v1/namespaces/{SAFE_NS}/events/{CANARY}", b'{"count": "many"}',
              "application/merge-patch+json"))
    @seed(run_seed)
    @settings(max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(requests())
    def one(req: tuple[str, str, bytes | None, str]) -> None:
        method, path, body, ctype = req
        before = canary.now()
        status, resp = raw(method, path, body, ctype)
        assert status < 500, (req, status, resp)
        after = raw("GET", canary.path)
        addressed = urllib.parse.urlsplit(path).path.startswith(f"/api/v1/namespaces/{SAFE_NS}")
        if urllib.parse.urlsplit(path).path == canary.path:
            reached.append(f"{method} {status}")
        if status >= 300 or method in READS or not addressed:
            assert after == (200, before), (f"seed {run_seed}", req, status, "changed the canary")
        rv = int(raw("GET", "/api/v1/namespaces/default/pods")[1]["metadata"]["resourceVersion"])
        assert rv >= last_rv[0], f"seed {run_seed}"
        last_rv[0] = rv

    one()
    print(f"requests addressing the canary: {len(reached)} ({', '.join(sorted(set(reached)))})")
    assert reached, f"seed {run_seed}: no request addressed the canary (the property proved nothing about it)"


EVENT_FIELDS = ["apiVersion", "kind", "metadata", "reason", "message", "type", "count", "involvedObject"]
META_FIELDS = ["name", "namespace", "labels", "uid", "resourceVersion", "generateName"]
field_values = json_values | st.sampled_from(["Pod", "v2", "Event", "v1", SAFE_NS, "other", CANARY])
own_fields = st.dictionaries(
    st.sampled_from(EVENT_FIELDS),
    field_values | st.dictionaries(st.sampled_from(META_FIELDS), field_values, max_size=2),
    min_size=1, max_size=3)


def test_a_refused_write_to_an_object_leaves_it_as_it_was(api: client.ApiClient, raw: Raw) -> None:
    """Writes aimed at the canary itself, with bodies built from its own fields, many of them refused
    (another kind or apiVersion, a metadata that is not an object, a name or namespace that contradicts
    the URL): the API server validates before it stores, so a refused one changes nothing."""
    canary = Canary(client.CoreV1Api(api), raw)
    run_seed = _seed()
    refused: list[str] = []

    @seed(run_seed)
    @settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(["PATCH", "PATCH", "PUT"]), own_fields,
           st.sampled_from(["application/merge-patch+json", "application/strategic-merge-patch+json",
                            "application/json-patch+json", "application/json"]))
    def one(method: str, fields: dict[str, Any], ctype: str) -> None:
        before = canary.now()
        body = json.dumps(before | fields if method == "PUT" else fields).encode()
        status, resp = raw(method, canary.path, body, ctype)
        assert status < 500, (method, fields, status, resp)
        if status >= 300:
            refused.append(f"{method} {status}")
            assert raw("GET", canary.path) == (200, before), (f"seed {run_seed}", method, fields, ctype, status,
                                                               "a refused write changed the canary")

    one()
    print(f"refused writes to the canary: {len(refused)} ({', '.join(sorted(set(refused)))})")
    assert len(refused) >= 10, f"seed {run_seed}: too few refused writes ({len(refused)}) to prove anything"
