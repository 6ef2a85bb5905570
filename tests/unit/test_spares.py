"""Warm spares, the pure parts: which nodes the guard makes spares or gives back, the node patch, and the
admission side (the pinned replacement tolerates the spare; no other pod does).

Shapes from upstream: a Node's ``spec.taints`` (key, value, effect, timeAdded) and a pod's
``spec.tolerations`` (key, operator, effect) as k8s.io/api core/v1 types.go defines them; a Ready node is
one whose ``Ready`` condition is ``True``; ResourceSlices (``spec.nodeName``, ``spec.pool.name``,
``spec.devices[].taints``) and ResourceClaim allocations (``status.allocation.devices.results[]``) as
k8s.io/api resource/v1 defines them; DeviceTaintRule's ``spec.deviceSelector`` as resource/v1alpha3.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from podmedic.domain.placement_holds import Hold, pin_patch
from podmedic.domain.spares import (
    SPARE_POOL,
    SPARE_TAINT,
    SPARE_TOLERATION,
    Fleet,
    SpareChange,
    SparesPolicy,
    plan_spares,
    served_by,
    spare_patch,
    unspare_patch,
)
from workers.admission.review import ReviewStats, review

LABEL = "nvidia.com/gpu.product"
H100 = "NVIDIA-H100-80GB-HBM3"
POLICY = SparesPolicy(per_pool=1, pool_label=LABEL)


def node(name: str, pool: str | None = H100, *, spare: bool = False, ready: bool = True, cordoned: bool = False,
         taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    labels = {LABEL: pool} if pool else {}
    all_taints = list(taints or [])
    notes = {}
    if spare:
        all_taints.append({"key": SPARE_TAINT, "value": str(pool), "effect": "NoSchedule"})
        notes[SPARE_POOL] = f"{LABEL}={pool}"
    return {"metadata": {"name": name, "labels": labels, "annotations": notes, "resourceVersion": "7"},
            "spec": {"taints": all_taints, **({"unschedulable": True} if cordoned else {})},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def slice_of(name: str, tainted: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": name, "pool": {"name": name},
                     "devices": [{"name": f"gpu-{i}", **({"taints": [{"key": "k", "effect": "NoExecute"}]}
                                                         if f"gpu-{i}" in tainted else {})} for i in range(2)]}}


def claim_on(name: str) -> dict[str, Any]:
    return {"status": {"allocation": {"devices": {"results": [
        {"driver": "gpu.nvidia.com", "pool": name, "device": "gpu-0"}]}}}}


def plan(nodes: list[dict[str, Any]], claims: list[dict[str, Any]] | None = None,
         rules: list[dict[str, Any]] | None = None, tainted: dict[str, tuple[str, ...]] | None = None,
         policy: SparesPolicy = POLICY) -> tuple[list[tuple[str, str]], dict[str, tuple[list[str], int]]]:
    slices = [slice_of(n["metadata"]["name"], (tainted or {}).get(n["metadata"]["name"], ())) for n in nodes]
    changes, pools = plan_spares(Fleet(nodes, slices, claims or [], rules or []), policy)
    return [(c.action, c.node) for c in changes], {p.pool: (p.spares, p.short) for p in pools}


def test_a_free_fit_node_becomes_the_pools_spare_and_a_busy_one_never_does() -> None:
    changes, pools = plan([node("a"), node("b"), node("c")], claims=[claim_on("a")])
    assert changes == [("add", "b")]
    assert pools == {H100: (["b"], 0)}


def test_a_kept_spare_stays_and_nothing_changes() -> None:
    assert plan([node("a"), node("b", spare=True)]) == ([], {H100: (["b"], 0)})


def test_a_spare_a_replacement_landed_on_is_given_back_and_another_free_node_takes_its_place() -> None:
    changes, pools = plan([node("a"), node("b", spare=True)], claims=[claim_on("b")])
    assert changes == [("drop", "b"), ("add", "a")]
    assert pools == {H100: (["a"], 0)}


def test_an_unfit_spare_is_given_back_whatever_made_it_unfit() -> None:
    quarantine = [{"key": "podmedic.io/quarantine", "effect": "NoExecute"}]
    for unfit in (node("b", spare=True, ready=False), node("b", spare=True, cordoned=True),
                  node("b", spare=True, taints=quarantine)):
        assert plan([unfit])[0] == [("drop", "b")], unfit
    assert plan([node("b", spare=True)], tainted={"b": ("gpu-1",)})[0] == [("drop", "b")]
    rule = {"spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "b", "device": "gpu-0"},
                     "taint": {"key": "x", "effect": "NoSchedule"}}}
    assert plan([node("b", spare=True)], rules=[rule])[0] == [("drop", "b")]


def test_a_pool_with_no_free_fit_node_is_short_and_a_node_in_no_pool_is_never_a_spare() -> None:
    changes, pools = plan([node("a"), node("b", pool=None)], claims=[claim_on("a")])
    assert changes == []
    assert pools == {H100: ([], 1)}


def test_extra_spares_and_spares_of_another_pool_label_are_given_back() -> None:
    assert plan([node("a", spare=True), node("b", spare=True)])[0] == [("drop", "b")]
    assert plan([node("a", spare=True)], policy=SparesPolicy(per_pool=0, pool_label=LABEL)) == \
        ([("drop", "a")], {H100: ([], 0)})
    other = SparesPolicy(per_pool=1, pool_label="karpenter.sh/nodepool")
    assert plan([node("a", spare=True)], policy=other)[0] == [("drop", "a")]


def test_the_patch_keeps_other_taints_carries_the_version_and_says_who_and_why() -> None:
    quarantine = {"key": "podmedic.io/quarantine", "effect": "NoExecute"}
    now = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    added = spare_patch(node("a", taints=[quarantine]), SpareChange(node="a", pool=H100, action="add", why="w"),
                        LABEL, now)
    assert added["metadata"]["resourceVersion"] == "7"
    assert added["spec"]["taints"] == [quarantine, {"key": SPARE_TAINT, "value": H100, "effect": "NoSchedule",
                                                    "timeAdded": "2026-11-30T12:00:00Z"}]
    assert added["metadata"]["annotations"][SPARE_POOL] == f"{LABEL}={H100}"
    assert "podmedic" in added["metadata"]["annotations"]["podmedic.io/changed-by"]
    dropped = spare_patch(node("a", spare=True, taints=[quarantine]),
                          SpareChange(node="a", pool=H100, action="drop", why="w"), LABEL, now)
    assert dropped["spec"]["taints"] == [quarantine]
    assert dropped["metadata"]["annotations"][SPARE_POOL] is None


def test_a_spare_serves_only_the_nodes_of_its_pool() -> None:
    spare = node("s", spare=True)
    assert served_by(node("a"), spare)
    assert not served_by(node("a", pool="NVIDIA-A100"), spare)
    assert not served_by(node("a"), node("s"))  # not a spare
    assert not served_by(spare, spare)


def _review(pod: dict[str, Any], holds: dict[str, str]) -> tuple[list[dict[str, Any]], str | None]:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "kind": {"kind": "Pod"}, "namespace": "ns",
                        "object": pod}}
    answer, done = review(body, lambda ns: holds, 100.0, ReviewStats())
    patch = answer["response"].get("patch")
    return (json.loads(base64.b64decode(patch)) if patch else []), done


def test_only_the_pod_pinned_to_a_spare_keeps_the_spares_toleration() -> None:
    own = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    pod = {"metadata": {"labels": {"batch.kubernetes.io/job-name": "j"}},
           "spec": {"tolerations": [own, dict(SPARE_TOLERATION)]}}
    patch, done = _review(pod, {})
    assert patch == [{"op": "replace", "path": "/spec/tolerations", "value": [own]}]
    assert done is not None and SPARE_TAINT in done
    assert unspare_patch({"spec": {"tolerations": [own, {"operator": "Exists"}]}}) == []  # a DaemonSet's: left
    hold = Hold(namespace="ns", labels={"batch.kubernetes.io/job-name": "j"}, node="s", incident_id="i",
                expires_at=200.0, tolerations=[SPARE_TOLERATION])
    pinned = pin_patch({"metadata": {}, "spec": {"tolerations": [own]}}, hold)
    assert {"op": "add", "path": "/spec/tolerations", "value": [own, SPARE_TOLERATION]} in pinned
    patch, done = _review({"metadata": pod["metadata"], "spec": {"tolerations": [own]}},
                          {"h": hold.model_dump_json()})
    assert {"op": "add", "path": "/spec/tolerations", "value": [own, SPARE_TOLERATION]} in patch
    assert done == "pinned to node s for incident i"
