"""Every pod of the cluster as one watch last saw it: the worker's reads without a request each.

An incident used to read its pods by polling: the checkpoint handshake every second, the
restart's verification every two, discovery's and every health read's lists. That was
two thirds of its API requests (``python -m benchmarks cost``). The cache is client-go's
reflector and indexer in miniature: list every pod, watch from the list's resourceVersion
with bookmarks, relist on 410 Gone, back off on any other error. Pods are kept whole but
for ``metadata.managedFields`` (what client-go's ``TransformStripManagedFields`` drops), each as
its compact JSON text with its labels and node beside it: a parsed pod takes five times the
memory of its text (a simulator pod: 11.9 KB against 2.2 KB), and a read parses only the pods
it returns, each a fresh copy the caller may change.

Reads are answered from the cache only while it is *current*: listed, and a watch from
there connected now. From a watch's end (its timeout, a dropped stream, an error) until the
API server accepts the next one, every read goes to the API server, so a partition never
serves old pods as new. A pod the cache does not hold is
read live too: it may be newer than the watch (a replacement just created); a selector
the cache cannot evaluate (set-based) is listed live. ``KubeGateway``'s pod reads
(``podmedic/kube/gateway.py``) make that choice for each read. A connected watch may still lag
(a busy worker, a slow stream): within ``live_reads`` every read goes to the API server, for a
verdict that must not rest on the watch (a poll's last look before it fails a rung).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from podmedic.domain.base import Obj
from podmedic.kube.errors import KubeError
from podmedic.kube.json_text import compact, parse
from podmedic.telemetry.thread_names import name_os_thread

log = logging.getLogger("podmedic.kube.pod_cache")

Key = tuple[str, str]

_LIVE = contextvars.ContextVar("podmedic_pod_reads_live", default=False)


@contextlib.contextmanager
def live_reads() -> Iterator[None]:
    """Within it, pod reads in this context (and threads started from it with its context, as
    ``asyncio.to_thread`` does) go to the API server: for a verdict that must not rest on a watch
    that may lag, such as a poll's last look before it fails a rung."""
    token = _LIVE.set(True)
    try:
        yield
    finally:
        _LIVE.reset(token)


class _Kept:
    """One pod as the cache holds it."""

    __slots__ = ("labels", "node", "text")

    def __init__(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        meta.pop("managedFields", None)
        self.labels: dict[str, str] = dict(meta.get("labels") or {})
        self.node = str((pod.get("spec") or {}).get("nodeName") or "")
        self.text = compact(pod)

    def pod(self) -> Obj:
        found: Obj = parse(self.text)
        return found


class Lister(Protocol):
    """The gateway's paged list and raw watch (``podmedic/kube/streams.py``)."""

    def list_pages(self, kind: str, *, field_selector: str | None = None,
                   page_size: int = 500) -> Iterator[tuple[list[Obj], str]]: ...

    def watch_objects(self, kind: str, resource_version: str | None, *, timeout_s: int = 30,
                      field_selector: str | None = None,
                      on_connect: Callable[[], None] | None = None) -> Iterator[tuple[str, Obj]]: ...


def equality_terms(selector: str) -> dict[str, str] | None:
    """``a=b,c==d`` as ``{a: b, c: d}``; None for a selector with set-based or negated terms,
    which the cache leaves to the API server."""
    terms: dict[str, str] = {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term or "=" not in term or " in " in term or term.startswith("!"):
            return None
        key, _, value = term.replace("==", "=", 1).partition("=")
        terms[key.strip()] = value.strip()
    return terms


class PodCache:
    """The cluster's pods, by namespace and name and by node; thread-safe."""

    def __init__(self, source: Lister, *, watch_timeout_s: int = 60,
                 backoff_s: tuple[float, float] = (0.5, 30.0)) -> None:
        self.source = source
        self.watch_timeout_s = watch_timeout_s
        self.backoff_s = backoff_s
        self._lock = threading.Lock()
        self._pods: dict[Key, _Kept] = {}
        self._by_node: dict[str, set[Key]] = {}
        self._current = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lists = 0
        self.watches = 0

    # -- reads: None means "not known here, ask the API server" -----------------------------
    @property
    def current(self) -> bool:
        """Listed, a watch from there connected now, and reads not asked to go live (``live_reads``)."""
        return self._current and not _LIVE.get()

    def get(self, namespace: str, name: str) -> Obj | None:
        """A copy of the pod, or None when the cache is not current or does not hold it."""
        with self._lock:
            kept = self._pods.get((namespace, name)) if self.current else None
        return kept.pod() if kept is not None else None

    def on_node(self, node: str) -> list[Obj] | None:
        """Copies of the pods bound to ``node``; None when the cache is not current."""
        with self._lock:
            if not self.current:
                return None
            kept = [self._pods[k] for k in sorted(self._by_node.get(node, ()))]
        return [k.pod() for k in kept]

    def matching(self, namespace: str, label_selector: str) -> list[Obj] | None:
        """Copies of ``namespace``'s pods matching an equality ``label_selector``; None when the cache
        is not current or the selector is not one it evaluates."""
        terms = equality_terms(label_selector)
        with self._lock:
            if terms is None or not self.current:
                return None
            found = sorted((key, kept) for key, kept in self._pods.items() if key[0] == namespace
                           and all(kept.labels.get(k) == v for k, v in terms.items()))
        return [kept.pod() for _, kept in found]

    # -- the reflector ---------------------------------------------------------------------
    def start(self) -> None:
        """List and watch in a daemon thread until ``stop``."""
        self._thread = threading.Thread(target=self._run, name="pod-cache", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the watch (at its next event or timeout); reads go live from now on."""
        self._stop.set()
        self._current = False

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
        log.warning("pod cache: %s; reading pods from the API server, watching again in %.3gs", exc, delay)
        self._stop.wait(delay)
        return min(delay * 2, self.backoff_s[1])

    def _relist(self) -> str:
        # Page by page into new maps, swapped in at the end: the whole list is never held parsed.
        pods: dict[Key, _Kept] = {}
        version = ""
        for page, first_version in self.source.list_pages("pods"):
            version = first_version
            for pod in page:
                pods[_key(pod)] = _Kept(pod)
        by_node: dict[str, set[Key]] = {}
        for key, kept in pods.items():
            if kept.node:
                by_node.setdefault(kept.node, set()).add(key)
        with self._lock:
            self._pods, self._by_node = pods, by_node
        self.lists += 1
        return version

    def _watch(self, version: str) -> str:
        # Current only while a watch is connected: between one watch's end and the next one's start
        # (a timeout, a dropped stream, an error), reads go to the API server.
        self._current = False
        self.watches += 1
        for kind, obj in self.source.watch_objects("pods", version, timeout_s=self.watch_timeout_s,
                                                   on_connect=self._connected):
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind in ("ADDED", "MODIFIED"):
                with self._lock:
                    self._put(obj)
            elif kind == "DELETED":
                with self._lock:
                    self._drop(_key(obj))
            if self._stop.is_set():
                break
        return version

    def _connected(self) -> None:
        self._current = not self._stop.is_set()

    def _put(self, pod: Obj) -> None:
        key = _key(pod)
        self._drop(key)
        kept = self._pods[key] = _Kept(pod)
        if kept.node:
            self._by_node.setdefault(kept.node, set()).add(key)

    def _drop(self, key: Key) -> None:
        old = self._pods.pop(key, None)
        if old is not None and old.node and (keys := self._by_node.get(old.node)) is not None:
            keys.discard(key)
            if not keys:
                del self._by_node[old.node]


def _key(pod: Obj) -> Key:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
