"""Watches: newline-delimited JSON events, as ``kubernetes.watch.Watch`` consumes them.

A watch starts from ``resourceVersion`` (replaying the store's history after it), or
without one from a synthetic ADDED event per existing object. An expired version is
answered, as the real server does for watches, with HTTP 200 and one ERROR event
carrying a 410 ``Status``. Bookmarks, when asked for, carry the current resourceVersion.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, dumps
from podmedic_sim.handlers_read import matching, selectors
from podmedic_sim.handlers_request import Target, context, query_bool, query_int
from podmedic_sim.store import Gone, WatchEvent

MAX_TIMEOUT_S = 1800


def _event_line(kind: str, obj: Obj) -> bytes:
    return dumps({"type": kind, "object": obj}) + b"\n"


def _start_rv(request: web.Request) -> int | None:
    raw = request.query.get("resourceVersion")
    if raw is None or raw == "" or raw == "0":
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise ApiError(400, f"invalid resourceVersion {raw!r}") from exc


async def handle_watch(request: web.Request, target: Target) -> web.StreamResponse:
    """Stream changes of a collection until the client leaves or ``timeoutSeconds``."""
    ctx = context(request)
    store = ctx.store
    labels, fields = selectors(request, target)
    start_rv = _start_rv(request)
    timeout = query_int(request, "timeoutSeconds")
    deadline = time.monotonic() + min(
        timeout if timeout and timeout > 0 else MAX_TIMEOUT_S, MAX_TIMEOUT_S
    )
    bookmarks = query_bool(request, "allowWatchBookmarks")
    plural, namespace = target.rt.plural, target.namespace

    def wanted(event: WatchEvent) -> bool:
        if event.resource != plural:
            return False
        obj = event.obj
        if namespace is not None and obj.get("metadata", {}).get("namespace") != namespace:
            return False
        return (labels is None or labels(obj)) and (fields is None or fields(obj))

    # Subscribe before reading history: both happen without yielding to the loop, so no
    # change can fall between them.
    queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
    unsubscribe = store.add_listener(lambda e: queue.put_nowait(e) if wanted(e) else None)
    lines: list[bytes] = []
    try:
        if start_rv is None:
            lines = [_event_line("ADDED", o) for o in matching(store, target, labels, fields)]
        else:
            lines = [
                _event_line(e.type, e.obj)
                for e in store.events_since(plural, start_rv)
                if wanted(e)
            ]
    except Gone as exc:
        unsubscribe()
        status = ApiError(410, exc.message, "Expired").status()
        return await _one_shot(request, [_event_line("ERROR", status)])

    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    task = asyncio.current_task()
    if task is not None:
        ctx.watches.add(task)
    try:
        await resp.prepare(request)
        if lines:
            await resp.write(b"".join(lines))
        await _pump(
            resp,
            queue,
            deadline,
            bookmarks,
            ctx.bookmark_interval_s,
            target,
            lambda: store.resource_version,
        )
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        unsubscribe()
        if task is not None:
            ctx.watches.discard(task)
    with contextlib.suppress(ConnectionResetError, RuntimeError):
        await resp.write_eof()
    return resp


async def _pump(
    resp: web.StreamResponse,
    queue: asyncio.Queue[WatchEvent],
    deadline: float,
    bookmarks: bool,
    interval: float,
    target: Target,
    current_rv: Any,
) -> None:
    next_bookmark = time.monotonic() + interval
    while True:
        now = time.monotonic()
        if now >= deadline:
            return
        wait = deadline - now
        if bookmarks:
            wait = min(wait, max(0.0, next_bookmark - now))
        try:
            if queue.empty():
                async with asyncio.timeout(wait):
                    event = await queue.get()
            else:
                event = queue.get_nowait()
        except TimeoutError:
            # A change can land between the timeout and this line; the bookmark must not overtake it
            # (the apiserver's cacher sends bookmarks through the same ordered channel as events:
            # staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go dispatchEvents), else a client
            # would record a resourceVersion past an event it has not processed.
            if bookmarks and time.monotonic() >= next_bookmark and queue.empty():
                mark = {
                    "kind": target.rt.kind,
                    "apiVersion": target.rt.api_version,
                    "metadata": {"resourceVersion": str(current_rv())},
                }
                await resp.write(_event_line("BOOKMARK", mark))
                next_bookmark = time.monotonic() + interval
            continue
        chunk = [_event_line(event.type, event.obj)]
        while not queue.empty():
            queued = queue.get_nowait()
            chunk.append(_event_line(queued.type, queued.obj))
        await resp.write(b"".join(chunk))


async def _one_shot(request: web.Request, lines: list[bytes]) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    await resp.prepare(request)
    await resp.write(b"".join(lines))
    await resp.write_eof()
    return resp
