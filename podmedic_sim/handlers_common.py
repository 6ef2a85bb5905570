"""Kubernetes ``Status`` error objects and JSON responses shared by the API handlers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.store import StoreError

REASON_BY_CODE = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


@dataclass
class Cause:
    """One entry of ``details.causes``: what is wrong with which field."""

    reason: str
    message: str
    field: str = ""

    def to_json(self) -> Obj:
        """The wire form, omitting an empty field path like the real server."""
        out: Obj = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass
class ApiError(Exception):
    """An error the API answers with a ``Status`` object."""

    code: int
    message: str
    reason: str = ""
    kind: str = ""
    name: str = ""
    group: str = ""
    causes: list[Cause] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)
        self.reason = self.reason or REASON_BY_CODE.get(self.code, "Unknown")

    def status(self) -> Obj:
        """The ``Status`` object describing this error."""
        details: Obj = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_json() for c in self.causes]
        out: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            out["details"] = details
        return out

    @classmethod
    def from_store(cls, err: StoreError, kind: str, group: str = "") -> ApiError:
        """Translate a store error, naming the resource as the real server does."""
        return cls(err.code, err.message, err.reason, kind=kind, name=err.name, group=group)


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes (no spaces: it is what goes over the wire most)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def json_response(
    obj: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response with the content type the client checks."""
    return web.Response(
        body=dumps(obj), status=status, content_type="application/json", headers=headers
    )


def error_response(err: ApiError) -> web.Response:
    """The ``Status`` response for ``err``."""
    return json_response(err.status(), err.code, err.headers or None)


def success_status(name: str, kind: str, group: str, uid: str) -> Obj:
    """The ``Status`` a DELETE answers with for resources that do not return the object."""
    details: Obj = {"name": name, "kind": kind, "uid": uid}
    if group:
        details["group"] = group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
