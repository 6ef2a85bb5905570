"""In-memory object store of the cluster simulator.

Holds every Kubernetes object as a plain JSON-like dict, keyed by resource plural,
namespace and name, with one cluster-wide resourceVersion counter like etcd's revision.
The store is not thread-safe on purpose: it lives on the simulator's event-loop thread,
and the HTTP handlers, the simulated kubelet/scheduler/controllers and the fault API all
run there. Other threads reach it through ``SimCluster.call``.

Stored objects are never mutated in place: every write stores a new dict, so a reader
may keep a reference without copying. Callers that want to change an object use
``mutate`` (which copies) or pass a fresh dict to ``replace``.
"""

from __future__ import annotations

import builtins
import datetime as dt
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from podmedic.domain.base import Obj

Key = tuple[str, str, str]  # (resource plural, namespace or "", name)

# Watch history kept per store; a watch asking for an older resourceVersion gets 410 Gone.
DEFAULT_HISTORY = 200_000


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists and immutable scalars), as stored objects are.

    ``copy.deepcopy`` keeps a memo for shared and cyclic references that JSON cannot have:
    a large share of the simulator's CPU went to it in ``python -m benchmarks orchestration``
    (py-spy), the training jobs' progress writes copying their Job and pods every second. This is
    several times faster on a pod (docs/BENCHMARKS.md).
    """
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    return value


class StoreError(Exception):
    """Base of the errors the HTTP layer turns into Kubernetes ``Status`` objects."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str, *, resource: str = "", name: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.resource = resource
        self.name = name


class NotFound(StoreError):
    code = 404
    reason = "NotFound"


class AlreadyExists(StoreError):
    code = 409
    reason = "AlreadyExists"


class Conflict(StoreError):
    code = 409
    reason = "Conflict"


class Gone(StoreError):
    code = 410
    reason = "Expired"


@dataclass(frozen=True)
class WatchEvent:
    """One change, as a watch delivers it: ADDED, MODIFIED or DELETED."""

    type: str
    resource: str
    obj: Obj
    rv: int


Listener = Callable[[WatchEvent], None]


def now_rfc3339() -> str:
    """The current UTC time in the format Kubernetes uses for timestamps."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Store:
    """Objects, resourceVersions, and the change feed that watches and controllers read."""

    history_size: int = DEFAULT_HISTORY
    _objects: dict[Key, Obj] = field(default_factory=dict)
    _by_resource: dict[str, dict[Key, Obj]] = field(default_factory=dict)
    _rv: int = 1
    _history: deque[WatchEvent] = field(default_factory=deque)
    _listeners: list[Listener] = field(default_factory=list)

    # -- reading -------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out (a list's ``metadata.resourceVersion``)."""
        return self._rv

    def get(self, resource: str, namespace: str | None, name: str) -> Obj:
        """The stored object; raises ``NotFound``. Do not mutate the result."""
        obj = self._objects.get((resource, namespace or "", name))
        if obj is None:
            raise NotFound(f'{resource} "{name}" not found', resource=resource, name=name)
        return obj

    def find(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        """The stored object or ``None``. Do not mutate the result."""
        return self._objects.get((resource, namespace or "", name))

    def list(self, resource: str, namespace: str | None = None) -> list[Obj]:
        """All objects of a resource, optionally in one namespace, in creation order."""
        return list(self.iter(resource, namespace))

    def iter(self, resource: str, namespace: str | None = None) -> Iterator[Obj]:
        """Like ``list`` without building the list. Do not write to the store meanwhile."""
        objs = self._by_resource.get(resource, {})
        if namespace is None:
            yield from objs.values()
        else:
            for (_, ns, _), obj in objs.items():
                if ns == namespace:
                    yield obj

    # -- writing -------------------------------------------------------------------------
    def create(self, resource: str, obj: Obj) -> Obj:
        """Store a new object, filling uid, resourceVersion, generation and timestamps."""
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["generateName"] + uuid.uuid4().hex[:5]
            meta["name"] = name
        key = (resource, meta.get("namespace") or "", name or "")
        if key in self._objects:
            raise AlreadyExists(f'{resource} "{name}" already exists', resource=resource, name=name)
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        return self._write("ADDED", resource, key, obj)

    def replace(self, resource: str, obj: Obj, *, check_rv: bool = True) -> Obj:
        """Store a new version of an existing object.

        Raises ``Conflict`` when ``check_rv`` and the object's resourceVersion is set and
        stale (optimistic concurrency, as the API server does for PUT and patches).
        """
        meta = obj.setdefault("metadata", {})
        key = (resource, meta.get("namespace") or "", meta.get("name") or "")
        old = self._objects.get(key)
        if old is None:
            raise NotFound(f'{resource} "{key[2]}" not found', resource=resource, name=key[2])
        sent_rv = meta.get("resourceVersion")
        if check_rv and sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on {resource} "{key[2]}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                resource=resource,
                name=key[2],
            )
        old_meta = old["metadata"]
        for kept in ("uid", "creationTimestamp"):
            meta[kept] = old_meta[kept]
        generation = old_meta.get("generation", 1)
        if obj.get("spec") != old.get("spec"):
            generation += 1
        meta["generation"] = generation
        if "deletionTimestamp" in old_meta:
            meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
        return self._write("MODIFIED", resource, key, obj)

    def mutate(
        self, resource: str, namespace: str | None, name: str, fn: Callable[[Obj], None]
    ) -> Obj:
        """Read-modify-write for the simulated controllers: copy, apply ``fn``, store."""
        obj: Obj = json_copy(self.get(resource, namespace, name))
        fn(obj)
        obj["metadata"].pop("resourceVersion", None)
        return self.replace(resource, obj, check_rv=False)

    def delete(self, resource: str, namespace: str | None, name: str) -> Obj:
        """Remove an object; the DELETED event carries its last state with a new rv."""
        key = (resource, namespace or "", name)
        old = self._objects.get(key)
        if old is None:
            raise NotFound(f'{resource} "{name}" not found', resource=resource, name=name)
        del self._objects[key]
        del self._by_resource[resource][key]
        self._rv += 1
        gone = dict(old)
        gone["metadata"] = {**old["metadata"], "resourceVersion": str(self._rv)}
        self._emit(WatchEvent("DELETED", resource, gone, self._rv))
        return gone

    # -- change feed ---------------------------------------------------------------------
    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every change; returns a function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def events_since(self, resource: str, rv: int) -> builtins.list[WatchEvent]:
        """Changes to ``resource`` newer than ``rv``; raises ``Gone`` if history lost them."""
        if rv < self._rv and self._history and self._history[0].rv > rv + 1:
            raise Gone(f"too old resource version: {rv} ({self._history[0].rv - 1})")
        return [e for e in self._history if e.rv > rv and e.resource == resource]

    # -- internals -----------------------------------------------------------------------
    def _write(self, kind: str, resource: str, key: Key, obj: Obj) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._objects[key] = obj
        self._by_resource.setdefault(resource, {})[key] = obj
        self._emit(WatchEvent(kind, resource, obj, self._rv))
        return obj

    def _emit(self, event: WatchEvent) -> None:
        self._history.append(event)
        while len(self._history) > self.history_size:
            self._history.popleft()
        for listener in list(self._listeners):
            listener(event)
