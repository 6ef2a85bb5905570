"""A controller's work queue: keys marked dirty, reconciled together in the next coalesced pass.

As client-go's rate-limited work queue does for a real controller, many events about one object
lead to one reconcile, and a reconcile never runs inside the store write that triggered it.
"""

from __future__ import annotations

from podmedic_sim.parts import SimParts
from podmedic_sim.timers import Coalescer

Key = tuple[str, str]


class Reconciler:
    """Base of the simulated workload controllers: ``mark`` a key, ``reconcile`` it soon after."""

    def __init__(self, parts: SimParts) -> None:
        self._dirty: set[Key] = set()
        self._pass = Coalescer(parts.timers, parts.config.timings.job_requeue_s, self._reconcile_dirty)

    def mark(self, key: Key) -> None:
        """Reconcile ``key`` in the next pass."""
        self._dirty.add(key)
        self._pass.kick()

    def _reconcile_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty):
            self.reconcile(key)

    def reconcile(self, key: Key) -> None:
        """Bring the object ``key`` (namespace, name) and what it owns in line with its spec."""
        raise NotImplementedError
