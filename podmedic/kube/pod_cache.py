"""Every pod of the cluster as one watch last saw it: the worker's reads without a request each.

An incident reads its pods again and again: the checkpoint handshake every second, the
restart's verification every two, discovery's and every health read's lists. Sent as requests,
those reads were most of its API requests (docs/BENCHMARKS.md). The cache is a reflector
(``podmedic/kube/reflector.py``) with an index by node: pods are kept whole but for
``metadata.managedFields``, each as its compact JSON text with its labels and node beside it (text
is several times smaller than the parsed dicts).

Reads are answered from the cache only while it is *current* (``reflector.py``). A pod the
cache does not hold is read live too: it may be newer than the watch (a replacement just created); a selector
the cache cannot evaluate (set-based) is listed live. ``KubeGateway``'s pod reads
(``podmedic/kube/gateway.py``) make that choice for each read. A connected watch may still lag
(a busy worker, a slow stream): within ``live_reads`` every read goes to the API server, for a
verdict that must not rest on the watch (a poll's last look before it fails a rung).
"""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic.kube.reflector import Key, Lister, Reflector, copy_of, kept_text, live_reads

__all__ = ["Lister", "PodCache", "equality_terms", "live_reads"]


class _Kept:
    """One pod as the cache holds it."""

    __slots__ = ("labels", "node", "text")

    def __init__(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        self.labels: dict[str, str] = dict(meta.get("labels") or {})
        self.node = str((pod.get("spec") or {}).get("nodeName") or "")
        self.text = kept_text(pod)

    def pod(self) -> Obj:
        return copy_of(self.text)


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


class PodCache(Reflector[_Kept]):
    """The cluster's pods, by namespace and name and by node; thread-safe."""

    kind = "pods"
    thread_name = "pod-cache"

    def __init__(self, source: Lister, *, watch_timeout_s: int = 60,
                 backoff_s: tuple[float, float] = (0.5, 30.0)) -> None:
        super().__init__(source, watch_timeout_s=watch_timeout_s, backoff_s=backoff_s)
        self._by_node: dict[str, set[Key]] = {}

    # -- reads: None means "not known here, ask the API server" -----------------------------
    def get(self, namespace: str, name: str) -> Obj | None:
        """A copy of the pod, or None when the cache is not current or does not hold it."""
        with self._lock:
            kept = self._held((namespace, name))
        return kept.pod() if kept is not None else None

    def on_node(self, node: str) -> list[Obj] | None:
        """Copies of the pods bound to ``node``; None when the cache is not current."""
        with self._lock:
            if not self.current:
                return None
            kept = [self._kept[k] for k in sorted(self._by_node.get(node, ()))]
        return [k.pod() for k in kept]

    def matching(self, namespace: str, label_selector: str) -> list[Obj] | None:
        """Copies of ``namespace``'s pods matching an equality ``label_selector``; None when the cache
        is not current or the selector is not one it evaluates."""
        terms = equality_terms(label_selector)
        with self._lock:
            if terms is None or not self.current:
                return None
            found = sorted((key, kept) for key, kept in self._kept.items() if key[0] == namespace
                           and all(kept.labels.get(k) == v for k, v in terms.items()))
        return [kept.pod() for _, kept in found]

    # -- what is kept, and the index by node -------------------------------------------------
    def _keep(self, obj: Obj) -> _Kept:
        return _Kept(obj)

    def _indexed(self, key: Key, kept: _Kept) -> None:
        if kept.node:
            self._by_node.setdefault(kept.node, set()).add(key)

    def _unindexed(self, key: Key, kept: _Kept) -> None:
        if kept.node and (keys := self._by_node.get(kept.node)) is not None:
            keys.discard(key)
            if not keys:
                del self._by_node[kept.node]

    def _reindexed(self) -> None:
        self._by_node = {}
        for key, kept in self._kept.items():
            self._indexed(key, kept)
