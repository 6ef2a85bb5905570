"""The agent's main loop: wait for XIDs, read every interval, translate, post."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from podmedic.agent.post import Poster
from podmedic.agent.readings import DeviceInfo, Reading, XidEvent
from podmedic.agent.translate import CloudEvent, Translator

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
    """``run_agent`` for several readers at once (one per simulated node), posting through one poster."""
    next_read = clock()
    while not stop.is_set():
        waits = await asyncio.gather(*(asyncio.to_thread(r.wait_xids, xid_wait_ms) for r, _ in nodes))
        events = [e for (_, t), xids in zip(nodes, waits, strict=True) for e in t.xids(xids)]
        if clock() >= next_read:
            next_read = clock() + interval_s
            readings = await asyncio.gather(*(asyncio.to_thread(r.read_all, _now()) for r, _ in nodes))
            events += [e for (_, t), rs in zip(nodes, readings, strict=True) for r in rs for e in t.reading(r)]
        if events:
            log.info("reporting %d events: %s", len(events),
                     ", ".join(f"{e['data']['device']} {e['data']['health']} {e['data'].get('reason', '')}"
                               for e in events[:10]))
            poster.enqueue(events)
        await poster.flush()
    await poster.flush()
    if poster.pending:
        log.warning("stopping with %d events not delivered", poster.pending)
    await poster.close()
