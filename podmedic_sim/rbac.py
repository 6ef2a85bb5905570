"""Authentication by bearer token and RBAC authorization, as kube-apiserver does them.

Authentication (k8s.io/apiserver ``pkg/authentication``): the kubeconfig's token (``kubeconfig.TOKEN``)
is the cluster's admin, in ``system:masters``, as a kind admin kubeconfig is; a token the TokenRequest
API issued for a ServiceAccount (``POST serviceaccounts/<name>/token``, what ``kubectl create token``
calls) is ``system:serviceaccount:<namespace>:<name>`` in the groups ``system:serviceaccounts``,
``system:serviceaccounts:<namespace>`` and ``system:authenticated``; any other token is 401. A request
with no credentials is the admin too (known difference: upstream it is ``system:anonymous``; the
simulator's tests and raw clients send none).

Authorization (kubernetes/kubernetes ``plugin/pkg/auth/authorizer/rbac``): ``system:masters`` may do
anything; anyone else may do what a ClusterRoleBinding, or a RoleBinding of the request's namespace,
grants a subject that is the user, one of its groups, or its ServiceAccount, through the rules of the
bound ClusterRole or Role (verbs, apiGroups, resources with ``res/sub`` and ``*``, resourceNames).
Non-resource paths (discovery, ``/version``, ``/openapi``) are open to every authenticated user
(the bootstrap ``system:discovery`` role), as are SelfSubjectAccessReview and SelfSubjectReview
(``system:basic-user``). The checks are those of ``podmedic_sim/audit.py`` (an exec upgrade needs
``get`` and ``create``). A refusal is 403 Forbidden worded as ``responsewriters.forbiddenMessage``.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Middleware

from podmedic.domain.base import Obj
from podmedic_sim.audit import checks
from podmedic_sim.handlers_common import ApiError, error_response
from podmedic_sim.kubeconfig import TOKEN as ADMIN_TOKEN
from podmedic_sim.store import Store

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_KEY = web.RequestKey("podmedic_sim_user", object)
SELF_REVIEWS = frozenset({("authorization.k8s.io", "selfsubjectaccessreviews"),
                          ("authentication.k8s.io", "selfsubjectreviews")})


@dataclass(frozen=True)
class User:
    """Who a request is from."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""

    @property
    def admin(self) -> bool:
        """In ``system:masters``: every request allowed."""
        return "system:masters" in self.groups


ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))


@dataclass
class Tokens:
    """The tokens the TokenRequest API issued: token -> the ServiceAccount's user."""

    issued: dict[str, User] = field(default_factory=dict)

    def issue(self, namespace: str, name: str, uid: str) -> str:
        """A new token for ServiceAccount ``namespace/name``."""
        token = secrets.token_urlsafe(32)
        self.issued[token] = User(f"system:serviceaccount:{namespace}:{name}",
                                  ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                   "system:authenticated"), uid)
        return token

    def authenticate(self, request: web.Request) -> User:
        """The request's user; 401 for credentials nobody issued."""
        header = request.headers.get("Authorization", "")
        if not header:
            return ADMIN
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip() == ADMIN_TOKEN:
            return ADMIN
        user = self.issued.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return user


@dataclass(frozen=True)
class Attributes:
    """One authorization check of a request."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def attributes(request: web.Request) -> list[Attributes]:
    """The checks ``request`` needs; none for a non-resource path."""
    watch = request.query.get("watch", "").lower() in ("true", "1")
    parts = [p for p in request.path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    namespace = rest[1] if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status" else ""
    if namespace:
        rest = rest[2:]
    elif rest[:1] == ["namespaces"] and len(rest) >= 2:
        namespace = rest[1]  # a namespace itself is in its own namespace, for RoleBindings
    name = rest[1] if len(rest) > 1 else ""
    return [Attributes(verb, group, resource, sub, namespace, name)
            for verb, group, resource, sub in checks(request.method, request.path, watch)]


def _subject_is(subject: Obj, user: User, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        return user.name == f"system:serviceaccount:{subject.get('namespace') or binding_namespace}:{name}"
    return False


def _bound_rules(store: Store, user: User, namespace: str) -> Iterator[Obj]:
    bindings = [(b, "") for b in store.iter("clusterrolebindings")]
    if namespace:
        bindings += [(b, namespace) for b in store.iter("rolebindings", namespace)]
    for binding, scope in bindings:
        if not any(_subject_is(s, user, scope) for s in binding.get("subjects") or []):
            continue
        ref = binding.get("roleRef") or {}
        plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        role = store.find(plural, scope if plural == "roles" else None, str(ref.get("name", "")))
        yield from (role or {}).get("rules") or []


def _rule_allows(rule: Obj, check: Attributes) -> bool:
    resource = f"{check.resource}/{check.subresource}" if check.subresource else check.resource
    resources = rule.get("resources") or []
    named = not rule.get("resourceNames") or check.name in rule["resourceNames"]
    return (any(v in ("*", check.verb) for v in rule.get("verbs") or [])
            and any(g in ("*", check.group) for g in rule.get("apiGroups") or [])
            and any(r in ("*", resource) or (check.subresource and r == f"*/{check.subresource}")
                    or (not check.subresource and r == f"{check.resource}/*") for r in resources)
            and named)


def allowed(store: Store, user: User, check: Attributes) -> bool:
    """Whether RBAC lets ``user`` make ``check``."""
    if user.admin or (check.group, check.resource) in SELF_REVIEWS:
        return True
    return any(_rule_allows(rule, check) for rule in _bound_rules(store, user, check.namespace))


def forbidden(user: User, check: Attributes) -> ApiError:
    """The 403 of ``check`` refused to ``user``, as the API server words it."""
    resource = f"{check.resource}/{check.subresource}" if check.subresource else check.resource
    scope = f'in the namespace "{check.namespace}"' if check.namespace else "at the cluster scope"
    why = f'User "{user.name}" cannot {check.verb} resource "{resource}" in API group "{check.group}" {scope}'
    qualified = f"{check.resource}.{check.group}" if check.group else check.resource
    subject = f'{qualified} "{check.name}"' if check.name else qualified
    return ApiError(403, f"{subject} is forbidden: {why}", "Forbidden", kind=check.resource, name=check.name,
                    group=check.group)


def middleware(tokens: Tokens, store: Callable[[], Store]) -> Middleware:
    """Authenticate each request and authorize each of its checks (Kubernetes paths only)."""

    @web.middleware
    async def rbac(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(("/api", "/openapi", "/version")):
            return await handler(request)
        try:
            user = tokens.authenticate(request)
            for check in attributes(request) if request.path.startswith("/api") else []:
                if not allowed(store(), user, check):
                    raise forbidden(user, check)
        except ApiError as refused:
            return error_response(refused)
        request[USER_KEY] = user
        return await handler(request)

    return rbac


def expiry(seconds: int) -> str:
    """When a token issued now for ``seconds`` expires."""
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
