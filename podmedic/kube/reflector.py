"""One kind of object as one list and watch last saw it: client-go's reflector, in miniature.

The worker's caches (``pod_cache.py``: every pod; ``object_cache.py``: ResourceClaims and
DeviceTaintRules) share this loop: list every object, watch from the list's resourceVersion
with bookmarks, relist on 410 Gone, back off on any other error. A cache answers only while
it is *current*: listed, and a watch from there connected now. From a watch's end (its
timeout, a dropped stream, an error) until the API server accepts the next one, ``current`` is
False and every read goes to the API server, so a partition never serves old objects as new.
Objects are kept as compact JSON text with ``metadata.managedFields`` dropped (what client-go's
``TransformStripManagedFields`` drops): a parsed object takes about five times the memory of its
text, and a read parses only what it returns, each a fresh copy the caller may change.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

from podmedic.domain.base import Obj
from podmedic.kube.errors import KubeError, NotServed
from podmedic.kube.json_text import compact, parse
from podmedic.telemetry.thread_names import name_os_thread

log = logging.getLogger("podmedic.kube.reflector")

Key = tuple[str, str]
"""An object's namespace (empty for a cluster-scoped kind) and name."""

_LIVE = contextvars.ContextVar("podmedic_reads_live", default=False)


@contextlib.contextmanager
def live_reads() -> Iterator[None]:
    """Within it, cached reads in this context (and threads started from it with its context, as
    ``asyncio.to_thread`` does) go to the API server: for a verdict that must not rest on a watch
    that may lag, such as a poll's last look before it fails a rung."""
    token = _LIVE.set(True)
    try:
        yield
    finally:
        _LIVE.reset(token)


class Lister(Protocol):
    """The gateway's paged list and raw watch (``podmedic/kube/streams.py``)."""

    def list_pages(self, kind: str, *, field_selector: str | None = None,
                   page_size: int = 500) -> Iterator[tuple[list[Obj], str]]: ...

    def watch_objects(self, kind: str, resource_version: str | None, *, timeout_s: int = 30,
                      field_selector: str | None = None,
                      on_connect: Callable[[], None] | None = None) -> Iterator[tuple[str, Obj]]: ...


def key_of(obj: Obj) -> Key:
    """``(namespace, name)`` of an API object."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def kept_text(obj: Obj) -> bytes:
    """What a cache keeps of ``obj``: its compact JSON without ``metadata.managedFields``."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return compact(obj)


def copy_of(text: bytes) -> Obj:
    """A fresh object from kept text."""
    found: Obj = parse(text)
    return found


T = TypeVar("T")


class Reflector(Generic[T]):
    """List and watch ``kind`` in a daemon thread, keeping ``T`` of each object by its key.

    Subclasses say what they keep (``_keep``, called outside the lock) and may index it
    (``_indexed`` and ``_unindexed``, called under ``self._lock``).
    """

    kind = ""
    thread_name = ""

    def __init__(self, source: Lister, *, watch_timeout_s: int = 60,
                 backoff_s: tuple[float, float] = (0.5, 30.0)) -> None:
        self.source = source
        self.watch_timeout_s = watch_timeout_s
        self.backoff_s = backoff_s
        self._lock = threading.Lock()
        self._kept: dict[Key, T] = {}
        self._current = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lists = 0
        self.watches = 0

    @property
    def current(self) -> bool:
        """Listed, a watch from there connected now, and reads not asked to go live (``live_reads``)."""
        return self._current and not _LIVE.get()

    def start(self) -> None:
        """List and watch in a daemon thread until ``stop``."""
        self._thread = threading.Thread(target=self._run, name=self.thread_name or self.kind, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the watch (at its next event or timeout); reads go live from now on."""
        self._stop.set()
        self._current = False

    def _held(self, key: Key) -> T | None:
        """What is kept of ``key`` while current, else None (call under ``self._lock``)."""
        return self._kept.get(key) if self.current else None

    # -- what a subclass keeps -----------------------------------------------------------
    def _keep(self, obj: Obj) -> T:
        raise NotImplementedError

    def _indexed(self, key: Key, kept: T) -> None:
        """``kept`` was stored under ``key``."""

    def _unindexed(self, key: Key, kept: T) -> None:
        """``kept`` was removed from under ``key``."""

    def _reindexed(self) -> None:
        """The whole store was replaced (a list): rebuild any index from ``self._kept``."""

    def _put(self, key: Key, kept: T) -> None:
        self._drop(key)
        self._kept[key] = kept
        self._indexed(key, kept)

    def _drop(self, key: Key) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            self._unindexed(key, old)

    # -- the loop ------------------------------------------------------------------------
    def _run(self) -> None:
        name_os_thread()
        version: str | None = None
        delay = self.backoff_s[0]
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._relist()
                version = self._watch(version)
                delay = self.backoff_s[0]
            except NotServed as exc:  # the cluster serves no such kind (a feature gate off): reads stay live
                log.info("%s cache: off, %s", self.kind, exc)
                return
            except KubeError as exc:
                self._current = False
                if exc.status == 410:
                    version = None  # too old to resume: list again
                    continue
                delay = self._back_off(exc, delay)
            except Exception as exc:  # the cache must outlive any one bad answer
                self._current = False
                delay = self._back_off(exc, delay)

    def _back_off(self, exc: Exception, delay: float) -> float:
        log.warning("%s cache: %s; reading %s from the API server, watching again in %.3gs",
                    self.kind, exc, self.kind, delay)
        self._stop.wait(delay)
        return min(delay * 2, self.backoff_s[1])

    def _relist(self) -> str:
        # Page by page into a new map, swapped in at the end: the whole list is never held parsed.
        kept: dict[Key, T] = {}
        version = ""
        for page, first_version in self.source.list_pages(self.kind):
            version = first_version
            for obj in page:
                kept[key_of(obj)] = self._keep(obj)
        with self._lock:
            self._kept = kept
            self._reindexed()
        self.lists += 1
        return version

    def _watch(self, version: str) -> str:
        # Current only while a watch is connected: between one watch's end and the next one's start
        # (a timeout, a dropped stream, an error), reads go to the API server.
        self._current = False
        self.watches += 1
        for kind, obj in self.source.watch_objects(self.kind, version, timeout_s=self.watch_timeout_s,
                                                   on_connect=self._connected):
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind in ("ADDED", "MODIFIED"):
                key, kept = key_of(obj), self._keep(obj)
                with self._lock:
                    self._put(key, kept)
            elif kind == "DELETED":
                with self._lock:
                    self._drop(key_of(obj))
            if self._stop.is_set():
                break
        return version

    def _connected(self) -> None:
        self._current = not self._stop.is_set()
