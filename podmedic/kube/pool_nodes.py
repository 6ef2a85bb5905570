"""Which node each node-local pool of devices belongs to, learned from ResourceSlices.

Discovery finds a failed device's pods through its node (the pod cache's by-node index), and a
node-local pool's node is its ResourceSlices' ``spec.nodeName`` (k8s.io/api resource/v1
``ResourceSliceSpec``: ``nodeName`` for node-local devices, unset for network-attached pools).
A pool does not move between nodes: a driver publishes each node's devices under a pool of
its own. So the map is read once, not per incident: the worker lists every slice at its start
(``KubeGateway.learn_pools``), and a pool it has not seen (a node added since) is read at its
first use (``KubeGateway.pool_node``): the driver's slices, since no API server selects slices by
pool name, and every pool of that answer is learned with it. Reading per incident instead would
cost a request per incident, all of them at the moment the API server is busiest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from podmedic.domain.base import Obj

MAX_POOLS = 100_000
"""Pools kept (forgotten all at once past it: each is read again on its next use); about 100 bytes each."""


class PoolNodes:
    """``(driver, pool) -> node`` for node-local pools; thread-safe (the worker's API threads share it)."""

    def __init__(self, limit: int = MAX_POOLS) -> None:
        self._nodes: dict[tuple[str, str], str] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, driver: str, pool: str) -> str | None:
        """The pool's node, if known."""
        with self._lock:
            return self._nodes.get((driver, pool))

    def learn(self, slices: Iterable[Obj]) -> int:
        """Record the node of every node-local slice's pool; how many slices named one."""
        learned = 0
        for rslice in slices:
            spec = rslice.get("spec") or {}
            driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name")
            node = spec.get("nodeName")
            if not (driver and pool and node):
                continue  # a network-attached pool (no nodeName), or a slice missing what the API requires
            with self._lock:
                if len(self._nodes) >= self._limit and (driver, pool) not in self._nodes:
                    self._nodes.clear()
                self._nodes[(str(driver), str(pool))] = str(node)
            learned += 1
        return learned

    def slice_selector(self, driver: str, pool: str) -> str:
        """The field selector of ``pool``'s ResourceSlices: no server selects by pool name, so what it does
        support (k8s.io/api ``ResourceSliceSelectorNodeName``, ``...Driver``): the pool's node when known,
        and the driver. Filter the answer with ``of_pool``."""
        node = self.get(driver, pool)
        return f"spec.nodeName={node},spec.driver={driver}" if node else f"spec.driver={driver}"

    def __len__(self) -> int:
        with self._lock:
            return len(self._nodes)


def of_pool(slices: Iterable[Obj], pool: str) -> list[Obj]:
    """The slices of ``pool`` among ``slices`` (those ``PoolNodes.slice_selector`` selected)."""
    return [s for s in slices if ((s.get("spec") or {}).get("pool") or {}).get("name") == pool]
