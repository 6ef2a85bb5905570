"""Node selection rules of the scheduler: nodeSelector, node affinity and node taints."""

from __future__ import annotations

from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.taints import blocks_scheduling, find_toleration


def _expression_matches(expr: dict[str, Any], value: str | None) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def term_matches(term: dict[str, Any], node: Obj) -> bool:
    """A NodeSelectorTerm: all its matchExpressions (labels) and matchFields must hold."""
    labels = node["metadata"].get("labels", {}) or {}
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no node, as in kube-scheduler
    if not all(_expression_matches(e, labels.get(e.get("key", ""))) for e in exprs):
        return False
    fields_of = {"metadata.name": node["metadata"]["name"]}
    return all(_expression_matches(f, fields_of.get(f.get("key", ""))) for f in fields)


def required_terms(pod: Obj) -> list[dict[str, Any]] | None:
    """The pod's required node affinity terms (ORed), or ``None`` when it has none."""
    aff = (pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    return None if req is None else list(req.get("nodeSelectorTerms") or [])


def pinned_nodes(pod: Obj) -> set[str] | None:
    """Node names the pod is restricted to by ``matchFields metadata.name In``, if every
    required term pins names this way (a fast path for "same node" rescheduling)."""
    terms = required_terms(pod)
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        fields = [
            f
            for f in term.get("matchFields") or []
            if f.get("key") == "metadata.name" and f.get("operator") == "In"
        ]
        if not fields:
            return None
        names.update(fields[0].get("values") or [])
    return names


def matches_node(pod: Obj, node: Obj) -> bool:
    """``spec.nodeSelector`` and required node affinity."""
    labels = node["metadata"].get("labels", {}) or {}
    for key, value in (pod.get("spec", {}).get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    terms = required_terms(pod)
    return terms is None or any(term_matches(t, node) for t in terms)


def preferred_score(pod: Obj, node: Obj) -> int:
    """Sum of the weights of the preferred node affinity terms the node matches."""
    aff = (pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    return sum(
        int(p.get("weight", 0))
        for p in aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if term_matches(p.get("preference") or {}, node)
    )


def untolerated_node_taint(pod: Obj, node: Obj) -> dict[str, Any] | None:
    """The first NoSchedule/NoExecute node taint the pod does not tolerate (``unschedulable``
    counts as the ``node.kubernetes.io/unschedulable`` taint)."""
    tolerations = pod.get("spec", {}).get("tolerations") or []
    taints = list(node.get("spec", {}).get("taints") or [])
    if node.get("spec", {}).get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    for taint in taints:
        effect = taint.get("effect", "")
        if (
            blocks_scheduling(effect)
            and find_toleration(tolerations, taint.get("key", ""), taint.get("value", ""), effect)
            is None
        ):
            return dict(taint)
    return None


def node_ready(node: Obj) -> bool:
    """Whether the node's Ready condition is True."""
    for cond in node.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False
