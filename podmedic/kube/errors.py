"""The errors ``podmedic/kube/gateway.py`` turns Kubernetes API answers into.

A few exception types whose class names Temporal retry policies can name: ``BadRequest``,
``InvalidObject`` and ``Forbidden`` fail a step at once; ``Conflict``, ``Throttled`` and ``ServerError`` are
retried. Kept apart from the gateway so that the gateway stays the one module importing
``kubernetes`` while it stays readable.
"""

from __future__ import annotations

import json


class KubeError(Exception):
    """A Kubernetes API call failed; ``status`` is the HTTP code (0 for no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class NotFound(KubeError):
    """404: the object does not exist (often fine: someone else removed it)."""


class Conflict(KubeError):
    """409: already exists, or a stale update; callers re-read and decide."""


class BadRequest(KubeError):
    """400: the server refused the request itself (an unsupported field selector, a malformed query);
    the same request can never succeed, so it is not retried."""


class InvalidObject(KubeError):
    """422: the server refused the object; retrying the same object cannot help."""


class Forbidden(KubeError):
    """401/403: podmedic lacks the permission; fix RBAC, do not retry."""


class Throttled(KubeError):
    """429: rate limited or blocked by a PodDisruptionBudget; retry later."""


class ServerError(KubeError):
    """5xx or no answer; retry later."""


class ProxyTimeout(ServerError):
    """A proxied call (pod or node proxy) got no answer within its own timeout."""


def from_answer(status: int, body: str | None, reason: str | None, what: str) -> KubeError:
    """The error for an API answer of ``status``; the message is the Status object's, if any."""
    try:
        message = json.loads(body or "{}").get("message") or reason
    except (ValueError, AttributeError):
        message = reason
    text = f"{what}: {status} {message}"
    kinds: dict[int, type[KubeError]] = {
        400: BadRequest, 404: NotFound, 409: Conflict, 422: InvalidObject, 401: Forbidden, 403: Forbidden,
        429: Throttled,
    }
    return kinds.get(status, ServerError)(text, status)


class NotServed(KubeError):
    """The cluster does not serve the API at all (a feature gate is off); no retry can help."""


class KubeConfigError(Exception):
    """No usable cluster configuration: the message names the kubeconfig (or in-cluster) and why."""
