"""Parsing of Kubernetes API requests: which resource, namespace, name and subresource."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError
from podmedic_sim.protobuf_body import read_protobuf
from podmedic_sim.rbac import Tokens
from podmedic_sim.resources import DEFAULT_API, ResourceType, ServedApi
from podmedic_sim.store import Store


@dataclass
class ApiContext:
    """What the handlers share: the store, the behaviour engine's hooks, and knobs."""

    store: Store
    evict: Callable[[str, str], None] | None = None
    bookmark_interval_s: float = 10.0
    # Tasks serving open watches, cancelled on shutdown so the server stops promptly.
    watches: set[asyncio.Task[Any]] = field(default_factory=set)
    # pods/exec of ``kill``: (namespace, pod, container, signal number) -> why not, or None.
    exec_signal: Callable[[str, str, str | None, int], str | None] | None = None
    # Mutating admission of a pod CREATE: (pod, namespace, dry run) -> the pod the webhooks left.
    admit_pod: Callable[[Obj, str, bool], Awaitable[Obj]] | None = None
    # The resource types and versions served (DeviceTaintRule's version follows the cluster's).
    api: ServedApi = DEFAULT_API
    # The ServiceAccount tokens the TokenRequest API issued (podmedic_sim/rbac.py).
    tokens: Tokens = field(default_factory=Tokens)


CONTEXT_KEY = web.AppKey("podmedic_api_context", ApiContext)


@dataclass(frozen=True)
class Target:
    """The object or collection a request addresses."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None

    @property
    def verb(self) -> str:
        """The resource-level verb-less label used by fault rules: ``pods`` or ``pods/status``."""
        return f"{self.rt.plural}/{self.sub}" if self.sub else self.rt.plural


def context(request: web.Request) -> ApiContext:
    """The ``ApiContext`` of the app serving ``request``."""
    return request.app[CONTEXT_KEY]


def parse_target(api: ServedApi, group: str, version: str, rest: str) -> Target:
    """Resolve the path after ``/api/v1`` or ``/apis/<group>/<version>``; 404 when unknown."""
    parts = [p for p in rest.split("/") if p]
    namespace: str | None = None
    if len(parts) >= 3 and parts[0] == "namespaces" and parts[2] != "status":
        namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        raise ApiError(404, "the server could not find the requested resource")
    rt = api.lookup(group, version, parts[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise ApiError(404, "the server could not find the requested resource")
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    if sub is not None and sub not in rt.subresources:
        raise ApiError(404, "the server could not find the requested resource")
    if rt.namespaced and name is not None and namespace is None:
        raise ApiError(404, "the server could not find the requested resource")
    return Target(rt, namespace, name, sub)


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 400 when it is not valid JSON."""
    raw = await request.read()
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body of the request could not be decoded as JSON: {exc}") from exc


async def read_object(request: web.Request) -> Obj:
    """The request body as a JSON object (or protobuf, as kubectl's typed clients send some kinds:
    podmedic_sim/protobuf_body.py); 400 when it is not one."""
    ctype = request.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
    if ctype == "application/vnd.kubernetes.protobuf":
        return read_protobuf(await request.read())
    if ctype and ctype not in ("application/json", "*/*", "text/plain"):
        raise ApiError(415, f"the body of the request was in an unknown format: {ctype}")
    body = await read_json(request)
    if not isinstance(body, dict):
        raise ApiError(400, "the body of the request must be a JSON object")
    return body


def query_bool(request: web.Request, name: str) -> bool:
    """A boolean query parameter as the real server reads it."""
    return request.query.get(name, "").lower() in ("true", "1")


def query_int(request: web.Request, name: str) -> int | None:
    """An integer query parameter; 400 when it is not an integer."""
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ApiError(400, f"invalid value for {name}: {value!r}") from exc


def dry_run(request: web.Request) -> bool:
    """Whether the request asks for ``dryRun=All``; 400 for any other value."""
    values = request.query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise ApiError(400, f'unsupported dryRun value "{value}"; only "All" is supported')
    return bool(values)
