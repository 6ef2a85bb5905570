"""The pod ``eviction`` subresource, honouring PodDisruptionBudgets as the real server does.

kubernetes/kubernetes ``pkg/registry/core/pod/storage/eviction.go``: a pod that is terminal, Pending or
already being deleted is deleted without looking at budgets (``canIgnorePDB``); more than one PDB
selecting the pod is a 500; otherwise the PDB's *status*, written by the disruption controller
(``podmedic_sim/disruption.py``), decides (``checkAndDecrement``): a PDB the controller has not synced
yet is 429 with ``Retry-After: 10``; no disruption allowed is 429 naming the budget's desired and
current healthy pods; else the eviction takes one (``disruptionsAllowed`` - 1, the pod recorded in
``disruptedPods``) and the pod is deleted. An unready pod is deleted when its PDB's
``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (``IfHealthyBudget``, the default) when the
budget is met.
"""

from __future__ import annotations

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.disruption import is_ready
from podmedic_sim.handlers_common import ApiError, Cause, json_response
from podmedic_sim.handlers_read import get_object
from podmedic_sim.handlers_request import Target, context, dry_run, read_object
from podmedic_sim.handlers_write import check_preconditions, delete_object
from podmedic_sim.selectors import label_selector_object
from podmedic_sim.store import Store, now_rfc3339

_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def _can_ignore_budgets(pod: Obj) -> bool:
    return ((pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Pending")
            or bool(pod["metadata"].get("deletionTimestamp")))


def check_budgets(store: Store, pod: Obj, dry: bool) -> None:
    """Raise 429 (or 500) when the pod's PodDisruptionBudget refuses its eviction; otherwise take one
    disruption from it (not on a dry run)."""
    if _can_ignore_budgets(pod):
        return
    pdbs = [pdb for pdb in store.iter("poddisruptionbudgets", pod["metadata"].get("namespace"))
            if label_selector_object((pdb.get("spec") or {}).get("selector"))(pod)]
    if len(pdbs) > 1:
        raise ApiError(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
                            "not support.")
    if not pdbs:
        return
    pdb = pdbs[0]
    spec, status, name = pdb.get("spec") or {}, pdb.get("status") or {}, pdb["metadata"]["name"]
    if not is_ready(pod):
        policy = spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
        if policy == "AlwaysAllow" or (healthy >= desired and desired > 0):
            return
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 1):
        raise ApiError(429, _REFUSED, "TooManyRequests", causes=[Cause(
            "DisruptionBudget", f"The disruption budget {name} is still being processed by the server.")],
            headers={"Retry-After": "10"})
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise ApiError(403, f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed is '
                            "negative")
    if allowed == 0:
        raise ApiError(429, _REFUSED, "TooManyRequests", causes=[Cause(
            "DisruptionBudget", f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
                                f"and has {status.get('currentHealthy', 0)} currently")])
    if dry:
        return
    pod_name = pod["metadata"]["name"]

    def take(o: Obj) -> None:
        taken = o.setdefault("status", {})
        taken["disruptionsAllowed"] = int(taken.get("disruptionsAllowed") or 0) - 1
        taken["disruptedPods"] = {**(taken.get("disruptedPods") or {}), pod_name: now_rfc3339()}

    store.mutate("poddisruptionbudgets", pdb["metadata"].get("namespace"), name, take)


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
    check_budgets(ctx.store, pod, dry_run(request))
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
