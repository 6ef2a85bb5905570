"""Rules an update must keep that a new object need not: what may change between old and new.

From kubernetes/kubernetes pkg/apis/core/validation/validation.go (``ValidatePodUpdate``):
``validateOnlyDeletedSchedulingGates`` lets an update remove a pod's scheduling gates but never
add one (KEP-3521), with the message ``only deletion is allowed, but found new scheduling gate
'<name>'`` on ``spec.schedulingGates[<index>].name``.
"""

from __future__ import annotations

from collections.abc import Callable

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import Cause


def _gate_names(pod: Obj) -> list[str]:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return [str(g.get("name", "")) for g in gates if isinstance(g, dict)]


def _pod_update(old: Obj, new: Obj) -> list[Cause]:
    before = set(_gate_names(old))
    return [
        Cause(
            "FieldValueForbidden",
            f"Forbidden: only deletion is allowed, but found new scheduling gate '{name}'",
            f"spec.schedulingGates[{index}].name",
        )
        for index, name in enumerate(_gate_names(new))
        if name not in before
    ]


UPDATE_RULES: dict[str, Callable[[Obj, Obj], list[Cause]]] = {"Pod": _pod_update}


def update_causes(old: Obj, new: Obj, kind: str) -> list[Cause]:
    """Causes from the kind's update rules (what an update of ``old`` into ``new`` may not do)."""
    rule = UPDATE_RULES.get(kind)
    return rule(old, new) if rule else []
