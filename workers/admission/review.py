"""One AdmissionReview in, one out: pin a new pod to the node a placement hold names, or keep a
fellow rank's new pod off that node (a preference) so it leaves the freed devices to the replacement;
and take the toleration of podmedic's warm-spare taint off any pod podmedic does not pin to a spare.

The shapes are admission.k8s.io/v1 (k8s.io/api admission/v1/types.go): the response carries the
request's ``uid``, ``allowed``, and a base64 RFC 6902 ``patch`` with ``patchType: JSONPatch``.
This webhook never refuses a pod: a pod no hold names is allowed unchanged, and when the holds
cannot be read the pod is allowed unchanged with a ``warnings`` entry (the API server returns it to
the client), as ``failurePolicy: Ignore`` would. A request that is no AdmissionReview is answered
400 with what is wrong, which the API server counts as a failed call.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from podmedic.domain.base import Obj
from podmedic.domain.placement_holds import fellow_rank_hold, keep_off_patch, matching_hold, parse_holds, pin_patch
from podmedic.domain.spares import SPARE_TAINT, unspare_patch

ReadHolds = Callable[[str], dict[str, str]]


class BadReview(ValueError):
    """The body is not an admission.k8s.io/v1 AdmissionReview with a request."""


@dataclass
class ReviewStats:
    """What the webhook did since it started (``GET /v1/stats``)."""

    reviewed: int = 0
    pinned: int = 0
    kept_off: int = 0
    unspared: int = 0
    unreadable_holds: int = 0
    bad_entries: list[str] = field(default_factory=list)


def request_of(body: Any) -> Obj:
    """The review's ``request``; ``BadReview`` saying what is missing."""
    if not isinstance(body, dict):
        raise BadReview("the body is not a JSON object")
    if body.get("apiVersion") != "admission.k8s.io/v1" or body.get("kind") != "AdmissionReview":
        raise BadReview(f"expected apiVersion admission.k8s.io/v1, kind AdmissionReview; got "
                        f"{body.get('apiVersion')!r}, {body.get('kind')!r}")
    request = body.get("request")
    if not isinstance(request, dict) or not request.get("uid"):
        raise BadReview("request.uid is missing")
    if not isinstance(request.get("object"), dict):
        raise BadReview("request.object is missing")
    return request


def review(body: Any, read_holds: ReadHolds, now: float, stats: ReviewStats) -> tuple[Obj, str | None]:
    """The AdmissionReview answering ``body``, and what was done to the pod (``None``: nothing)."""
    request = request_of(body)
    stats.reviewed += 1
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    pod, namespace = request["object"], str(request.get("namespace") or "")
    if request.get("operation") != "CREATE" or (request.get("kind") or {}).get("kind") != "Pod" or not namespace:
        return answer, None
    try:
        holds, errors = parse_holds(read_holds(namespace))
    except Exception as err:
        stats.unreadable_holds += 1
        response["warnings"] = [f"podmedic: placement holds not read ({err}); pod admitted unchanged"]
        return answer, None
    for error in errors:
        if error not in stats.bad_entries:
            stats.bad_entries.append(error)
    hold = matching_hold(pod, namespace, holds, now)
    patch, done = [], []
    if hold is not None:
        stats.pinned += 1
        patch, done = pin_patch(pod, hold), [f"pinned to node {hold.node} for incident {hold.incident_id}"]
    elif (hold := fellow_rank_hold(pod, namespace, holds, now)) is not None:
        stats.kept_off += 1
        patch = keep_off_patch(pod, hold)
        done = [f"kept off node {hold.node} (preferred) for incident {hold.incident_id}: the devices there are "
                f"held for another rank's replacement"]
    if hold is None or not hold.tolerations:
        unspare = unspare_patch(pod)
        if unspare:
            stats.unspared += 1
            patch = [*unspare, *patch]
            done.append(f"toleration of {SPARE_TAINT} removed: warm spares take only the replacements podmedic "
                        "pins there")
    if not patch:
        return answer, None
    response["patchType"] = "JSONPatch"
    response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    response["warnings"] = [f"podmedic: {line}" for line in done]
    return answer, "; ".join(done)
