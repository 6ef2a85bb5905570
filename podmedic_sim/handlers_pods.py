"""The pod ``eviction`` subresource, honouring PodDisruptionBudgets like the real server."""

from __future__ import annotations

import math
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, Cause, json_response
from podmedic_sim.handlers_read import get_object
from podmedic_sim.handlers_request import Target, context, dry_run, read_object
from podmedic_sim.handlers_write import check_preconditions, delete_object
from podmedic_sim.selectors import label_selector_object
from podmedic_sim.store import Store


def is_ready(pod: Obj) -> bool:
    """Whether the pod's Ready condition is True (what a PDB counts as healthy)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent PDB field resolved against ``total`` (percentages round up)."""
    if isinstance(value, str) and value.endswith("%"):
        try:
            return math.ceil(int(value[:-1]) * total / 100)
        except ValueError:
            return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def budget(store: Store, pdb: Obj) -> tuple[int, int, int]:
    """(expected pods, currently healthy, desired healthy) for a PodDisruptionBudget."""
    spec = pdb.get("spec") or {}
    select = label_selector_object(spec.get("selector"))
    pods = [
        p
        for p in store.iter("pods", pdb["metadata"].get("namespace"))
        if select(p)
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    expected, healthy = len(pods), sum(1 for p in pods if is_ready(p))
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = 0
    return expected, healthy, desired


def check_budgets(store: Store, pod: Obj) -> None:
    """Raise 429 when evicting ``pod`` would violate its PodDisruptionBudget."""
    pdbs = [
        pdb
        for pdb in store.iter("poddisruptionbudgets", pod["metadata"].get("namespace"))
        if label_selector_object((pdb.get("spec") or {}).get("selector"))(pod)
    ]
    if len(pdbs) > 1:
        raise ApiError(
            500,
            "This pod has more than one PodDisruptionBudget, which the "
            "eviction subresource does not support.",
        )
    if not pdbs:
        return
    pdb = pdbs[0]
    _, healthy, desired = budget(store, pdb)
    policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
    if not is_ready(pod) and (policy == "AlwaysAllow" or healthy >= desired):
        return
    if healthy - desired >= 1 and is_ready(pod):
        return
    name = pdb["metadata"]["name"]
    raise ApiError(
        429,
        "Cannot evict pod as it would violate the pod's disruption budget.",
        "TooManyRequests",
        causes=[
            Cause(
                "DisruptionBudget",
                f"The disruption budget {name} needs {desired} "
                f"healthy pods and has {healthy} currently",
            )
        ],
        headers={"Retry-After": "10"},
    )


async def handle_eviction(request: web.Request, target: Target) -> web.Response:
    """POST pods/<name>/eviction: check budgets, then let the engine evict the pod."""
    ctx = context(request)
    body = await read_object(request)
    if body.get("kind") not in (None, "Eviction"):
        raise ApiError(400, f"expected an Eviction, got {body.get('kind')!r}")
    name = (body.get("metadata") or {}).get("name")
    if name and name != target.name:
        raise ApiError(400, "name in URL does not match name in Eviction object")
    pod = get_object(ctx.store, Target(target.rt, target.namespace, target.name, None))
    # The eviction deletes through the pod's store with its deleteOptions, preconditions included
    # (pkg/registry/core/pod/storage/eviction.go), so a pod replaced under the same name is a 409.
    check_preconditions(pod, body.get("deleteOptions") or {}, target)
    check_budgets(ctx.store, pod)
    if not dry_run(request):
        assert target.namespace is not None and target.name is not None
        if ctx.evict is not None:
            ctx.evict(target.namespace, target.name)
        else:
            pod_target = Target(target.rt, target.namespace, target.name, None)
            delete_object(ctx.store, pod_target, body.get("deleteOptions") or {}, False)
    return json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        201,
    )
