"""The agent's main loop: wait for XIDs, read every interval, translate, post."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from workers.agent.post import Poster
from workers.agent.readings import DeviceInfo, Reading, XidEvent
from workers.agent.translate import CloudEvent, Translator

log = logging.getLogger(__name__)


class Reader(Protocol):
    """What the loop needs from a device reader (``NvmlReader``)."""

    devices: list[DeviceInfo]

    def wait_xids(self, timeout_ms: int) -> list[XidEvent]:
        """XID events within ``timeout_ms``."""

    def read_all(self, at: dt.datetime) -> list[Reading]:
        """One reading per device."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def once(reader: Reader, translator: Translator, xid_wait_ms: int = 1000) -> list[CloudEvent]:
    """Each device's present state, plus any XID within ``xid_wait_ms`` (``--once``)."""
    xids = reader.wait_xids(xid_wait_ms)
    return [translator.snapshot(r) for r in reader.read_all(_now())] + translator.xids(xids)


async def run_agent(reader: Reader, translator: Translator, poster: Poster, *, interval_s: float,
                    stop: asyncio.Event, xid_wait_ms: int = 1000,
                    clock: Callable[[], float] = time.monotonic) -> None:
    """Run until ``stop`` is set; then try once more to deliver what is spooled.

    NVML calls block, so they run in a worker thread; the XID wait bounds how long a stop
    request waits (``xid_wait_ms``).
    """
    await run_agents([(reader, translator)], poster, interval_s=interval_s, stop=stop, xid_wait_ms=xid_wait_ms,
                     clock=clock)


async def run_agents(nodes: Sequence[tuple[Reader, Translator]], poster: Poster, *, interval_s: float,
                     stop: asyncio.Event, xid_wait_ms: int = 1000,
                     clock: Callable[[], float] = time.monotonic) -> None:
    """``run_agent`` for several readers at once (one per simulated node), posting through one poster.

    Each node's XID wait is its own, as each node's agent is when deployed: an XID is posted when it
    arrives, never held until every other node's wait has run out.
    """
    next_read = clock()
    waits: dict[int, asyncio.Task[list[XidEvent]]] = {}
    while not stop.is_set():
        for i, (reader, _) in enumerate(nodes):
            if i not in waits:
                waits[i] = asyncio.create_task(asyncio.to_thread(reader.wait_xids, xid_wait_ms))
        done, _ = await asyncio.wait(waits.values(), return_when=asyncio.FIRST_COMPLETED)
        ready = sorted(i for i, task in waits.items() if task in done)
        events = [e for i in ready for e in nodes[i][1].xids(waits.pop(i).result())]
        if clock() >= next_read:
            next_read = clock() + interval_s
            readings = await asyncio.gather(*(asyncio.to_thread(r.read_all, _now()) for r, _ in nodes))
            events += [e for (_, t), rs in zip(nodes, readings, strict=True) for r in rs for e in t.reading(r)]
        _enqueue(poster, events)
        await poster.flush()
    # The waits still out end within xid_wait_ms (a thread cannot be cancelled): what they bring is posted too.
    for i, xids in zip(list(waits), await asyncio.gather(*waits.values()), strict=True):
        _enqueue(poster, nodes[i][1].xids(xids))
    await poster.flush()
    if poster.pending:
        log.warning("stopping with %d events not delivered", poster.pending)
    await poster.close()


def _enqueue(poster: Poster, events: list[CloudEvent]) -> None:
    if events:
        log.info("reporting %d events: %s", len(events),
                 ", ".join(f"{e['data']['device']} {e['data']['health']} {e['data'].get('reason', '')}"
                           for e in events[:10]))
        poster.enqueue(events)
