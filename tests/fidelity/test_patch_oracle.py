"""A second referee for patches: the same patch applied by the server and by kubectl's own Go code.

``kubectl patch --local`` applies a patch offline with k8s.io/apimachinery's ``strategicpatch``,
``jsonpatch`` and JSON merge patch, using the Go types of each kind (their ``patchStrategy`` and
``patchMergeKey`` tags: pods' ``schedulingGates`` and ``containers`` merge by name, ``conditions`` by
type, ``finalizers`` as a set). ``kubectl patch`` without ``--local`` sends the same patch to the
server under test. Generated patches (hypothesis) must give the same object both ways, for pods
(scheduling gates, containers, annotations, labels, finalizers, status conditions), ResourceClaims
and DeviceTaintRules, and a patch one refuses the other must refuse too. A patch the server refuses
as an invalid update (422: a pod's spec is mostly immutable) says nothing about patching and is not
compared. The fields the server owns (``resourceVersion``, ``generation``, ``managedFields``, and a
taint's ``timeAdded`` when its effect changes, and the status a controller writes) are left out of the
comparison.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from tests.fidelity.conftest import Kubectl

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
GATES = ["g1", "g2", "g3"]
FINALIZERS = ["a.io/one", "a.io/two"]
keys = st.sampled_from(["team", "tier", "podmedic.io/incident"])
values = st.none() | st.sampled_from(["x", "y", ""])


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"team": "a"}, "annotations": {"tier": "b"},
                         "finalizers": list(FINALIZERS)},
            "spec": {"nodeName": "", "schedulerName": "podmedic-test-none",
                     "schedulingGates": [{"name": g} for g in GATES],
                     "containers": [{"name": "c", "image": "registry.local/app:1"},
                                    {"name": "d", "image": "registry.local/side:1"}]}}


@st.composite
def pod_patches(draw: st.DrawFn) -> tuple[str, Any]:
    kind = draw(st.sampled_from(["strategic", "merge", "json"]))
    if kind == "json":
        ops = draw(st.lists(st.sampled_from([
            {"op": "add", "path": "/metadata/annotations/added", "value": "1"},
            {"op": "remove", "path": "/metadata/labels/team"},
            {"op": "replace", "path": "/spec/containers/1/image", "value": "registry.local/side:2"},
            {"op": "remove", "path": "/spec/schedulingGates/0"},
            {"op": "test", "path": "/metadata/labels/team", "value": "a"},
            {"op": "test", "path": "/metadata/labels/team", "value": "not-a"},
            {"op": "remove", "path": "/metadata/finalizers/1"},
        ]), min_size=1, max_size=3))
        return kind, ops
    meta = {"annotations": draw(st.dictionaries(keys, values, max_size=2)),
            "labels": draw(st.dictionaries(keys, values, max_size=2))}
    spec: dict[str, Any] = {}
    if kind == "strategic":
        gone = draw(st.lists(st.sampled_from(GATES), unique=True, max_size=2))
        if gone:
            spec["schedulingGates"] = [{"name": g, "$patch": "delete"} for g in gone]
        if draw(st.booleans()):
            spec["containers"] = [{"name": draw(st.sampled_from(["c", "d"])), "image": "registry.local/app:9"}]
        if draw(st.booleans()):
            meta["$deleteFromPrimitiveList/finalizers"] = draw(st.lists(st.sampled_from(FINALIZERS), max_size=1))
    elif draw(st.booleans()):
        kept = draw(st.lists(st.sampled_from(GATES), unique=True, max_size=3))
        spec["schedulingGates"] = [{"name": g} for g in GATES if g in kept] or None
    body: dict[str, Any] = {"metadata": meta}
    if spec:
        body["spec"] = spec
    return kind, body


conditions = st.lists(st.fixed_dictionaries({
    "type": st.sampled_from(["Ready", "PodScheduled", "DisruptionTarget"]),
    "status": st.sampled_from(["True", "False"])}), max_size=3, unique_by=lambda c: c["type"])


def _comparable(obj: dict[str, Any], status: bool) -> dict[str, Any]:
    """``obj`` less what the server owns; its status only for a patch of the status (a controller may
    write the status of the main resource between the read and the patch)."""
    out = json.loads(json.dumps(obj))
    if not status:
        out.pop("status", None)
    for field in ("resourceVersion", "generation", "managedFields"):
        out["metadata"].pop(field, None)
    ((out.get("spec") or {}).get("taint") or {}).pop("timeAdded", None)
    return dict(out)


def _both(kubectl: Kubectl, tmp: Path, ns: str | None, resource: str, stored: dict[str, Any], kind: str,
          patch: Any, subresource: str | None = None) -> None:
    """Apply ``patch`` locally (kubectl's Go code) and on the server; require the same outcome."""
    source = tmp / f"{uuid.uuid4().hex}.json"
    source.write_text(json.dumps(stored))
    scope = ["-n", ns] if ns else []
    extra = [f"--subresource={subresource}"] if subresource else []
    local = kubectl("patch", "--local", "-f", str(source), "--type", kind, "-p", json.dumps(patch), "-o", "json")
    served = kubectl("patch", *scope, resource, *extra, "--type", kind, "-p", json.dumps(patch), "-o", "json")
    if served.returncode != 0 and "is invalid" in served.stderr:
        return  # refused as an invalid update: a validation rule, not a patch difference
    assert (local.returncode == 0) == (served.returncode == 0), (
        f"{kind} patch {patch}: local rc {local.returncode} ({local.stderr.strip()}), "
        f"server rc {served.returncode} ({served.stderr.strip()})")
    if local.returncode == 0:
        on_status = subresource == "status"
        assert _comparable(json.loads(served.stdout), on_status) == _comparable(json.loads(local.stdout), on_status), \
            f"{kind} {patch}"


def _stored(kubectl: Kubectl, ns: str | None, resource: str) -> dict[str, Any]:
    """The object as the server stores it, read with kubectl (the wire form, timestamps as sent)."""
    scope = ["-n", ns] if ns else []
    found: dict[str, Any] = json.loads(kubectl("get", *scope, resource, "-o", "json", check=True).stdout)
    return found


def _created_pod(api: client.ApiClient, ns: str, kubectl: Kubectl) -> dict[str, Any]:
    name = f"oracle-{uuid.uuid4().hex[:8]}"
    pod = _pod(name)
    del pod["spec"]["nodeName"]
    client.CoreV1Api(api).create_namespaced_pod(ns, pod)
    return _stored(kubectl, ns, f"pod/{name}")


def test_pod_patches_match_kubectls_own(api: client.ApiClient, ns: str, kubectl: Kubectl, tmp_path: Path) -> None:
    @SETTINGS
    @given(pod_patches())
    def check(case: tuple[str, Any]) -> None:
        stored = _created_pod(api, ns, kubectl)
        _both(kubectl, tmp_path, ns, f"pod/{stored['metadata']['name']}", stored, case[0], case[1])

    check()


def test_pod_status_condition_patches_merge_by_type(api: client.ApiClient, ns: str, kubectl: Kubectl,
                                                    tmp_path: Path) -> None:
    @SETTINGS
    @given(conditions, conditions)
    def check(first: list[dict[str, str]], second: list[dict[str, str]]) -> None:
        name = _created_pod(api, ns, kubectl)["metadata"]["name"]
        kubectl("patch", "-n", ns, f"pod/{name}", "--subresource=status", "--type", "strategic", "-p",
                json.dumps({"status": {"conditions": first}}), check=True)
        stored = _stored(kubectl, ns, f"pod/{name}")
        _both(kubectl, tmp_path, ns, f"pod/{name}", stored, "strategic", {"status": {"conditions": second}},
              subresource="status")

    check()


def test_claim_and_taint_rule_patches_match_kubectls_own(api: client.ApiClient, ns: str, kubectl: Kubectl,
                                                          tmp_path: Path) -> None:
    resources = client.ResourceV1Api(api)

    @SETTINGS
    @given(st.sampled_from(["strategic", "merge"]), st.dictionaries(keys, values, max_size=2),
           st.sampled_from(["NoSchedule", "NoExecute", "None"]), st.sampled_from(["v1", "v2"]))
    def check(kind: str, labels: dict[str, str | None], effect: str, value: str) -> None:
        name = f"oracle-{uuid.uuid4().hex[:8]}"
        resources.create_namespaced_resource_claim(ns, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
        _both(kubectl, tmp_path, ns, f"resourceclaim/{name}", _stored(kubectl, ns, f"resourceclaim/{name}"), kind,
              {"metadata": {"labels": labels}})
        resources.create_device_taint_rule({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "p", "device": "d"},
                     "taint": {"key": "example.com/oracle", "value": "v0", "effect": "NoSchedule"}}})
        try:
            _both(kubectl, tmp_path, None, f"devicetaintrule/{name}", _stored(kubectl, None, f"devicetaintrule/{name}"),
                  kind, {"metadata": {"labels": labels}, "spec": {"taint": {"effect": effect, "value": value}}})
        finally:
            resources.delete_device_taint_rule(name)

    check()
