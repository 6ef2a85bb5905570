"""Kubernetes Events written by the simulated components, aggregated like client-go's recorder.

Repeated (object, reason, message) triples bump ``count`` and ``lastTimestamp`` of one
Event instead of creating a new one, which keeps crash loops from flooding the store.
"""

from __future__ import annotations

import uuid
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.store import Store, now_rfc3339

# Aggregation memory is bounded so that a long demo cannot grow it without limit.
_MAX_REMEMBERED = 50_000


class Recorder:
    """Writes core/v1 Events about pods, nodes and other objects."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._seen: dict[tuple[str, str, str, str], tuple[str, str]] = {}

    def event(
        self,
        obj: Obj,
        reason: str,
        message: str,
        *,
        type_: str = "Normal",
        component: str = "kubelet",
        host: str = "",
    ) -> None:
        """Record an Event about ``obj`` (a stored object dict with apiVersion/kind)."""
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        uid = meta.get("uid", "")
        key = (uid, reason, message, component)
        now = now_rfc3339()
        remembered = self._seen.get(key)
        if remembered is not None:
            existing = self._store.find("events", remembered[0], remembered[1])
            if existing is not None:

                def bump(ev: Obj) -> None:
                    ev["count"] = int(ev.get("count", 1)) + 1
                    ev["lastTimestamp"] = now

                self._store.mutate("events", remembered[0], remembered[1], bump)
                return
        name = f"{meta.get('name', 'unknown')}.{uuid.uuid4().hex[:16]}"
        source: dict[str, Any] = {"component": component}
        if host:
            source["host"] = host
        self._store.create(
            "events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion", "v1"),
                    "kind": obj.get("kind", "Pod"),
                    "name": meta.get("name", ""),
                    "namespace": meta.get("namespace", ""),
                    "uid": uid,
                    "resourceVersion": meta.get("resourceVersion", ""),
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "source": source,
                "reportingComponent": component,
                "reportingInstance": host or component,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            },
        )
        if len(self._seen) >= _MAX_REMEMBERED:
            self._seen.clear()
        self._seen[key] = (namespace, name)
