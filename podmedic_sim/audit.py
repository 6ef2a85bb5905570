"""An audit recorder: which Kubernetes API permissions podmedic's own requests needed.

With ``PODMEDIC_SIM_AUDIT_DIR`` set, every simulator (in-process or a child of ``podmedic up``)
appends one JSON line per new ``(component, verb, group, resource, subresource)`` it serves to
``<dir>/audit-<pid>.jsonl``; the lines of every process and test module together are the set
the ClusterRoles in deploy/ must grant (``tests/deploy/test_rbac_proof.py``).

Who called is read from the User-Agent ``podmedic.kube.gateway.KubeGateway`` sets: ``podmedic-worker/…``
and ``podmedic-ingest/…`` are the components; ``podmedic/…`` is a gateway a test built for its
own setup (recorded as ``unscoped``, never part of the proof); anything else is the test's own
client and is not recorded. The kubernetes client's WebSocket path (pods/exec) forwards only the
Authorization header, so an exec upgrade without a User-Agent is recorded as ``websocket``.

Verbs follow the API server's authorizer: GET of a name is ``get``, of a collection ``list``
(``watch`` with ``watch=true``), POST ``create``, PUT ``update``, PATCH ``patch``, DELETE of a
name ``delete``, of a collection ``deletecollection``. ``pods/exec`` (and ``attach``,
``portforward``) over a WebSocket is an HTTP GET, authorized as ``get``; from Kubernetes 1.35 the
API server also makes a synthetic ``create`` check on it (KEP-4006, kubernetes/kubernetes#134577,
feature gate ``AuthorizePodWebsocketUpgradeCreatePermission``, beta and on by default), so it needs
both. Over SPDY it is a POST: ``create``. Every version the simulator serves (1.35-1.37) checks both.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from podmedic.settings.groups import Simulator

ENV = "PODMEDIC_SIM_AUDIT_DIR"
UNSCOPED = "unscoped"
WEBSOCKET = "websocket"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, order=True)
class Access:
    """One permission a request needed."""

    component: str
    verb: str
    group: str
    resource: str
    subresource: str = ""

    @property
    def rule(self) -> tuple[str, str, str]:
        """``(verb, group, resource[/subresource])`` as RBAC writes it."""
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return self.verb, self.group, res


def component_of(request: web.Request) -> str | None:
    """Who sent ``request``: a podmedic component, ``unscoped``, ``websocket``, or ``None`` (a test client)."""
    agent = request.headers.get("User-Agent", "")
    name = agent.split("/", 1)[0]
    if name == "podmedic":
        return UNSCOPED
    if name.startswith("podmedic-"):
        return name.removeprefix("podmedic-")
    if not agent and request.headers.get("Upgrade", "").lower() == "websocket":
        return WEBSOCKET
    return None


def classify(method: str, path: str, watch: bool) -> tuple[str, str, str, str] | None:
    """``(verb, group, resource, subresource)`` of a request path; ``None`` for non-resource paths."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
        rest = rest[2:]
    if not rest:
        return None
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    # The pod/node proxy path continues after the subresource; its first segment is the subresource.
    sub = rest[2] if len(rest) > 2 else ""
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    if method in verbs:
        verb = verbs[method]
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    elif name:
        verb = "get"
    else:
        verb = "watch" if watch else "list"
    return verb, group, resource, sub


STREAMING = frozenset({"exec", "attach", "portforward"})
"""Pod subresources whose WebSocket GET gets the synthetic ``create`` check (1.35+)."""


def checks(method: str, path: str, watch: bool, *, websocket_create: bool = True) -> list[tuple[str, str, str, str]]:
    """Every authorization check the API server makes for a request: the request's own verb, and for
    a WebSocket GET of exec/attach/portforward also ``create`` when ``websocket_create`` (1.35+)."""
    kind = classify(method, path, watch)
    if kind is None:
        return []
    verb, group, resource, sub = kind
    if websocket_create and resource == "pods" and sub in STREAMING and verb == "get":
        return [kind, ("create", group, resource, sub)]
    return [kind]


def strongest(method: str, path: str, watch: bool) -> tuple[str, str, str, str] | None:
    """The request's most powerful check (an exec upgrade: ``create``), as the request ledger counts it."""
    found = checks(method, path, watch)
    return found[-1] if found else None


class AuditLog:
    """Appends each new access to ``<directory>/audit-<pid>.jsonl`` (shared by this process's simulators)."""

    _lock = threading.Lock()
    _seen: set[tuple[Path, Access]] = set()

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.file = directory / f"audit-{os.getpid()}.jsonl"

    def record(self, access: Access) -> None:
        """Write ``access`` once per process."""
        with self._lock:
            if (self.file, access) in self._seen:
                return
            self._seen.add((self.file, access))
            with self.file.open("a", encoding="utf-8") as out:
                out.write(json.dumps(asdict(access)) + "\n")

    def middleware(self) -> Middleware:
        """An aiohttp middleware recording podmedic's requests before anything can refuse them."""

        @web.middleware
        async def audit(request: web.Request, handler: Handler) -> web.StreamResponse:
            component = component_of(request)
            if component is not None:
                watch = request.query.get("watch", "").lower() in ("true", "1")
                for kind in checks(request.method, request.path, watch):
                    access = Access(component, *kind)
                    for tap in list(TAPS):
                        tap(access)
                    self.record(access)
            return await handler(request)

        return audit


TAPS: list[Callable[[Access], None]] = []
"""Called with every access, repeats included (the file keeps each once): tests that count
requests in a time span (tests/e2e_guard: no write while the fleet guard is tripped)."""


WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
"""Verbs that change the cluster (pods/exec and pods/eviction are ``create``)."""


@contextmanager
def tapped() -> Iterator[list[tuple[float, Access]]]:
    """Every access served while the block runs, with its monotonic time (needs the recorder on)."""
    seen: list[tuple[float, Access]] = []

    def tap(access: Access) -> None:
        seen.append((time.monotonic(), access))

    TAPS.append(tap)
    try:
        yield seen
    finally:
        TAPS.remove(tap)


def middlewares_from_env() -> list[Middleware]:
    """The recorder's middleware when ``PODMEDIC_SIM_AUDIT_DIR`` is set, else none."""
    directory = Simulator.load().sim_audit_dir
    return [AuditLog(directory).middleware()] if directory else []


def read_accesses(directory: Path) -> set[Access]:
    """Every access recorded under ``directory`` by any process."""
    found: set[Access] = set()
    for file in sorted(directory.glob("audit-*.jsonl")):
        found.update(_parse(file.read_text(encoding="utf-8").splitlines()))
    return found


def _parse(lines: Iterable[str]) -> Iterator[Access]:
    for line in lines:
        if line.strip():
            yield Access(**json.loads(line))
