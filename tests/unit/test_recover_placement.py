"""The replacement of a bare pod and the same-node capacity check (pure functions)."""

from __future__ import annotations

from typing import Any

from activities.recovery.placement import (
    GATE,
    free_healthy_devices,
    prefer_label_key,
    replacement_name,
    replacement_pod,
)
from podmedic.domain.models import DeviceRef


def _bare() -> dict[str, Any]:
    return {
        "metadata": {"name": "bare", "namespace": "ml", "uid": "u1", "resourceVersion": "9", "labels": {"a": "b"},
                     "annotations": {"podmedic.io/checkpoint-request": "r", "podmedic.io/checkpoint-id": "c1",
                                     "podmedic.io/progress": "5"}},
        "spec": {"nodeName": "node-1", "priorityClassName": "hi", "priority": 1000,
                 "containers": [{"name": "main", "image": "img"}]},
        "status": {"phase": "Running"},
    }


def test_replacement_drops_node_bits_and_is_gated_with_a_preference() -> None:
    body = replacement_pod(_bare(), replacement_name("bare", "req-1"), "node-1", "device/d/p/g", "why")
    assert body["metadata"]["name"] == replacement_name("bare", "req-1") != replacement_name("bare", "req-2")
    assert "uid" not in body["metadata"] and "status" not in body
    assert "nodeName" not in body["spec"] and "priority" not in body["spec"]
    assert body["spec"]["schedulingGates"] == [{"name": GATE}]
    notes = body["metadata"]["annotations"]
    assert notes["podmedic.io/checkpoint-id"] == "c1" and "podmedic.io/checkpoint-request" not in notes
    assert "podmedic.io/progress" not in notes and notes["podmedic.io/replaces"] == "bare (u1)"
    term = body["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["preference"]["matchFields"][0]["values"] == ["node-1"]
    anywhere = replacement_pod(_bare(), "x", None, "i", "why")
    assert "affinity" not in anywhere["spec"]


def test_prefer_label_key_comes_from_the_template_opt_in() -> None:
    pod = {"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "prefer.podmedic.io/train", "operator": "Exists"}]}}]}}}}
    assert prefer_label_key(pod) == "prefer.podmedic.io/train"
    assert prefer_label_key({"spec": {}}) is None


def test_free_devices_exclude_allocated_tainted_and_failed() -> None:
    slices = [{"spec": {"driver": "d", "nodeName": "n", "pool": {"name": "n"}, "devices": [
        {"name": f"gpu-{i}", **({"taints": [{"key": "k", "effect": "NoSchedule"}]} if i == 3 else {})}
        for i in range(5)]}}]
    claims = [{"status": {"allocation": {"devices": {"results": [{"driver": "d", "pool": "n", "device": "gpu-1"}]}}}}]
    rules = [{"spec": {"deviceSelector": {"driver": "d", "pool": "n", "device": "gpu-2"},
                       "taint": {"effect": "NoExecute"}}},
             {"spec": {"deviceSelector": {"device": "gpu-4"}, "taint": {"effect": "None"}}}]
    failed = DeviceRef(driver="d", pool="n", device="gpu-0")
    assert free_healthy_devices("n", "d", slices, claims, rules, failed) == ["d/n/gpu-4"]


def test_the_evicted_pods_own_generated_claims_count_as_free() -> None:
    """A pod of three GPUs on a node of four, one failed: its claim generated from a ResourceClaimTemplate
    (ownerReferences: the pod, controller) is deleted with it (kubernetes/kubernetes
    pkg/controller/resourceclaim/controller.go), so its two healthy GPUs and the spare take the replacement.
    A claim the pod only names (no controller reference) stays allocated: its devices stay taken."""
    slices = [{"spec": {"driver": "d", "nodeName": "n", "pool": {"name": "n"},
                        "devices": [{"name": f"gpu-{i}"} for i in range(4)]}}]

    def claim(owner: dict[str, object] | None, *devices: str) -> dict[str, object]:
        return {"metadata": {"ownerReferences": [owner] if owner else []},
                "status": {"allocation": {"devices": {"results": [
                    {"driver": "d", "pool": "n", "device": d} for d in devices]}}}}

    generated = claim({"kind": "Pod", "uid": "p1", "controller": True}, "gpu-0", "gpu-1", "gpu-2")
    failed = DeviceRef(driver="d", pool="n", device="gpu-0")
    assert free_healthy_devices("n", "d", slices, [generated], [], failed) == ["d/n/gpu-3"]
    assert free_healthy_devices("n", "d", slices, [generated], [], failed, "p1") == ["d/n/gpu-1", "d/n/gpu-2",
                                                                                   "d/n/gpu-3"]
    assert free_healthy_devices("n", "d", slices, [generated], [], failed, "other") == ["d/n/gpu-3"]
    named = claim({"kind": "Pod", "uid": "p1"}, "gpu-1", "gpu-2")
    assert free_healthy_devices("n", "d", slices, [named], [], failed, "p1") == ["d/n/gpu-3"]
