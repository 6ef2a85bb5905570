"""The authentication and authorization APIs a client calls: TokenRequest, SelfSubjectAccessReview, SelfSubjectReview.

- ``POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`` (authentication.k8s.io/v1 TokenRequest,
  ``kubectl create token``): a token for the ServiceAccount, 404 when it does not exist;
  ``spec.expirationSeconds`` defaults to 3600 (``pkg/registry/core/serviceaccount/storage/token.go``).
- ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`` (``kubectl auth can-i``): whether the
  caller may make the check in ``spec.resourceAttributes``; ``nonResourceAttributes`` are allowed to
  every authenticated user, as the bootstrap discovery roles allow them.
- ``POST /apis/authentication.k8s.io/v1/selfsubjectreviews`` (``kubectl auth whoami``): who the caller is.
"""

from __future__ import annotations

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, json_response
from podmedic_sim.handlers_read import get_object
from podmedic_sim.handlers_request import Target, context, read_object
from podmedic_sim.rbac import ADMIN, USER_KEY, Attributes, User, allowed, expiry
from podmedic_sim.store import now_rfc3339


def _user(request: web.Request) -> User:
    user = request.get(USER_KEY)
    return user if isinstance(user, User) else ADMIN


async def handle_token_request(request: web.Request, target: Target) -> web.Response:
    """POST serviceaccounts/<name>/token."""
    ctx = context(request)
    account = get_object(ctx.store, Target(target.rt, target.namespace, target.name, None))
    body = await read_object(request)
    spec: Obj = body["spec"] if isinstance(body.get("spec"), dict) else {}
    seconds = spec.get("expirationSeconds") or 3600
    if not isinstance(seconds, int) or seconds < 600:
        raise ApiError(422, "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes")
    assert target.namespace is not None and target.name is not None
    token = ctx.tokens.issue(target.namespace, target.name, account["metadata"].get("uid", ""))
    return json_response({
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": target.name, "namespace": target.namespace, "creationTimestamp": now_rfc3339()},
        "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                 "expirationSeconds": seconds, "boundObjectRef": spec.get("boundObjectRef")},
        "status": {"token": token, "expirationTimestamp": expiry(seconds)}}, 201)


async def handle_self_review(request: web.Request, target: Target) -> web.Response:
    """POST selfsubjectaccessreviews or selfsubjectreviews."""
    body = await read_object(request)
    user = _user(request)
    if target.rt.kind == "SelfSubjectReview":
        info: Obj = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        return json_response({**body, "metadata": {"creationTimestamp": now_rfc3339()},
                              "status": {"userInfo": info}}, 201)
    spec: Obj = body["spec"] if isinstance(body.get("spec"), dict) else {}
    wanted = spec.get("resourceAttributes")
    if isinstance(wanted, dict):
        check = Attributes(str(wanted.get("verb", "")), str(wanted.get("group", "")), str(wanted.get("resource", "")),
                           str(wanted.get("subresource", "")), str(wanted.get("namespace", "")),
                           str(wanted.get("name", "")))
        ok = allowed(context(request).store, user, check)
    elif isinstance(spec.get("nonResourceAttributes"), dict):
        ok = True
    else:
        raise ApiError(422, "spec: Invalid value: exactly one of nonResourceAttributes or resourceAttributes must "
                            "be specified")
    status: Obj = {"allowed": ok}
    if ok and not user.admin:
        status["reason"] = "RBAC: allowed by a binding of the caller"
    return json_response({**body, "metadata": {"creationTimestamp": now_rfc3339()}, "status": status}, 201)
