"""ResourceClaims and DeviceTaintRules as one watch of each last saw them: reads without a request.

An incident read its pod's ResourceClaim once (discovery) and its DeviceTaintRule once (to
release it over the version it read): two of its ten API requests (``python -m benchmarks
cost``). Both kinds change seldom (a claim when it is allocated, reserved or released; a rule
when it is created, its status or holders change, or it is deleted), so a watch of each costs
little. Reads follow the pod cache's rules (``reflector.py``): answered only while current, and
an object the cache does not hold is read from the API server (it may be newer than the watch).
A write made over a cached version that the API server has since changed fails with 409
Conflict, as it would over any stale read: callers read again with ``fresh``.
"""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic.kube.reflector import Lister, Reflector, copy_of, kept_text

CLAIMS = "resourceclaims"
TAINT_RULES = "devicetaintrules"
THREAD_NAMES = {CLAIMS: "claim-cache", TAINT_RULES: "rule-cache"}
"""Each cache's thread, as ``top -H`` and the cost benchmark's CPU by thread show it (15 characters at most)."""


class ObjectCache(Reflector[bytes]):
    """Every object of one kind, by namespace (empty when cluster-scoped) and name; thread-safe."""

    def __init__(self, source: Lister, kind: str, *, watch_timeout_s: int = 60,
                 backoff_s: tuple[float, float] = (0.5, 30.0)) -> None:
        super().__init__(source, watch_timeout_s=watch_timeout_s, backoff_s=backoff_s)
        self.kind = kind
        self.thread_name = THREAD_NAMES.get(kind, kind)

    def get(self, namespace: str, name: str) -> Obj | None:
        """A copy of the object, or None when the cache is not current or does not hold it."""
        with self._lock:
            text = self._held((namespace, name))
        return copy_of(text) if text is not None else None

    def _keep(self, obj: Obj) -> bytes:
        return kept_text(obj)
