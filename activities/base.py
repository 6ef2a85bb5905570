"""What every activity class shares: the gateway, run off the event loop on podmedic's own threads."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from activities.heartbeat import kept_alive
from podmedic.kube.cache_only import WouldRequest, cache_only
from podmedic.kube.gateway import KubeGateway
from podmedic.telemetry.thread_names import name_os_thread

P = ParamSpec("P")
T = TypeVar("T")

CALLS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="kube", initializer=name_os_thread)
"""Threads for blocking API calls. asyncio's default pool has ``CPUs + 4`` threads (6 on a 2-core
worker): in a 1,000-device storm every activity's calls queued behind six. An incident's writes are not
made here but on the event loop (``podmedic/kube/loop_calls.py``)."""


class KubeActivities:
    """Base of activity classes that talk to the cluster through one ``KubeGateway``."""

    def __init__(self, kube: KubeGateway) -> None:
        self.kube = kube

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking gateway call in a thread, heartbeating while it takes long."""
        return await blocking(fn, *args, **kwargs)


async def blocking(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking call (the gateway's, a backend's) on ``CALLS``: ``asyncio.to_thread`` for activities."""
    return await _in(CALLS, functools.partial(fn, *args, **kwargs))


async def cached_first(read: Callable[[], T], run: Callable[[Callable[[], T]], Awaitable[T]] | None = None) -> T:
    """``read`` on the event loop when the worker's caches answer it alone (``podmedic/kube/cache_only.py``),
    else through ``run`` (a thread: ``blocking``). For reads only: what ``read`` did before it needed
    a request is done again in the thread. A look at a cached pod took 8 us of CPU on the loop and 66 us
    handed to a thread and back (3,000 reads each way, on the 2-core benchmark machine)."""
    with cache_only():
        try:
            return read()
        except WouldRequest:
            pass
    return await (run or blocking)(read)


async def _in(pool: ThreadPoolExecutor, call: Callable[[], T]) -> T:
    # The activity's context (activity.info(), heartbeats, the trace) lives in contextvars: copied
    # into the thread, as asyncio.to_thread does. An activity stays alive while the call queues and
    # runs, however long (activities/heartbeat.py).
    return await kept_alive(asyncio.get_running_loop().run_in_executor(pool, contextvars.copy_context().run, call))
