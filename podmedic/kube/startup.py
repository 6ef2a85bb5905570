"""What the worker and the ingest say about the cluster at start: one line each, never a traceback.

The worker says where DeviceTaintRule is served (or which gate to switch on, and that node
quarantine stands in for device taints), and learns every node-local pool's node in the background
(``podmedic/kube/pool_nodes.py``); the ingest says when the cluster's version reports pod
device health only behind the ResourceHealthStatus gate. A cluster that cannot be read yet is
said once too: both facts are looked up again when they are needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from podmedic.kube.api_versions import health_status_note
from podmedic.kube.errors import KubeError
from podmedic.kube.gateway import KubeGateway

log = logging.getLogger("podmedic.kube")
T = TypeVar("T")


async def _read(read: Callable[[], T], what: str) -> T | None:
    try:
        return await asyncio.to_thread(read)
    except KubeError as exc:
        log.warning("could not read %s yet (%s): looked up again when needed", what, exc)
        return None


async def say_taint_rules(kube: KubeGateway) -> None:
    """Which DeviceTaintRule version podmedic uses, or which gate to switch on (a warning)."""
    found = await _read(kube.taint_rule_api, "the DeviceTaintRule API")
    if found is not None:
        log.log(logging.INFO if found.version else logging.WARNING, "%s", found.describe())


async def say_health_status(kube: KubeGateway) -> None:
    """A warning when the cluster's version hides pod-status device health behind a gate."""
    version = await _read(kube.server_version, "the API server's version")
    note = health_status_note(version) if version is not None else None
    if note is not None:
        log.warning("%s", note)


@contextlib.asynccontextmanager
async def learning_pools(kube: KubeGateway) -> AsyncIterator[None]:
    """Within it, every ResourceSlice is read once in the background, so incidents find their pool's node
    without a request (``KubeGateway.learn_pools``); the worker polls meanwhile. A failed read is said
    once, and each pool is then read at its first incident, as a pool added later is."""

    async def learn() -> None:
        began = time.monotonic()
        learned = await _read(kube.learn_pools, "the ResourceSlices (each pool's node is read at its first incident)")
        if learned is not None:
            log.info("pool map: %d node-local pools learned from %d slices in %.1fs", len(kube.pool_nodes), learned,
                     time.monotonic() - began)

    task = asyncio.create_task(learn(), name="podmedic-learn-pools")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
