"""Watches: newline-delimited JSON events, as ``kubernetes.watch.Watch`` consumes them.

A watch starts from ``resourceVersion`` (replaying the store's history after it), or
without one from a synthetic ADDED event per existing object. An expired version is
answered, as the real server does for watches, with HTTP 200 and one ERROR event
carrying a 410 ``Status``. Bookmarks, when asked for, carry the current resourceVersion.

A streaming list (KEP-3157 WatchList, what client-go's reflectors and ``kubectl wait`` ask for since
1.35): ``sendInitialEvents=true`` with ``resourceVersionMatch=NotOlderThan`` and
``allowWatchBookmarks=true`` sends an ADDED event per current object, then a BOOKMARK annotated
``k8s.io/initial-events-end: "true"`` (``metav1.InitialEventsAnnotationKey``) carrying the version the
initial events are of, then the changes after it. Other combinations are refused as apimachinery's
``metainternalversion/validation`` ``ValidateListOptions`` refuses them: 422 Invalid ListOptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, Cause, dumps
from podmedic_sim.handlers_read import matching, selectors
from podmedic_sim.handlers_request import Target, context, query_bool, query_int
from podmedic_sim.store import Gone, WatchEvent
from podmedic_sim.tables import as_table, wants_table

MAX_TIMEOUT_S = 1800
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
NOT_OLDER_THAN = "NotOlderThan"


Shape = Callable[[Obj], Obj]
"""What an event's object is sent as: itself, or (``as=Table``) a one-row Table of it."""


def _event_line(kind: str, obj: Obj, shape: Shape | None = None) -> bytes:
    return dumps({"type": kind, "object": shape(obj) if shape is not None else obj}) + b"\n"


def _start_rv(request: web.Request) -> int | None:
    raw = request.query.get("resourceVersion")
    if raw is None or raw == "" or raw == "0":
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise ApiError(400, f"invalid resourceVersion {raw!r}") from exc


def _send_initial_events(request: web.Request) -> bool | None:
    """The watch's ``sendInitialEvents`` (``None`` when not given); 422 for the combinations upstream's
    ``validateWatchOptions`` forbids."""
    raw, match = request.query.get("sendInitialEvents"), request.query.get("resourceVersionMatch", "")
    send = None if raw is None else raw.lower() in ("true", "1")
    causes = []
    if send is not None and match != NOT_OLDER_THAN:
        causes.append(Cause("FieldValueForbidden", f"sendInitialEvents requires setting resourceVersionMatch "
                                                   f"to {NOT_OLDER_THAN}", "resourceVersionMatch"))
    if match and send is None:
        causes.append(Cause("FieldValueForbidden", "resourceVersionMatch is forbidden for watch unless "
                                                   "sendInitialEvents is provided", "resourceVersionMatch"))
    if match and match != NOT_OLDER_THAN:
        causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{match}": supported values: '
                                                      f'"{NOT_OLDER_THAN}"', "resourceVersionMatch"))
    if send and not query_bool(request, "allowWatchBookmarks"):
        causes.append(Cause("FieldValueForbidden", "allowWatchBookmarks must be set to true when "
                                                   "sendInitialEvents is true", "allowWatchBookmarks"))
    if causes:
        raise ApiError(422, f"ListOptions.meta.k8s.io \"\" is invalid: {causes[0].field}: {causes[0].message}",
                       kind="ListOptions", group="meta.k8s.io", causes=causes)
    return send


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
    initial_events = _send_initial_events(request)
    plural, namespace = target.rt.plural, target.namespace
    shape: Shape | None = None
    if wants_table(request):

        def shape(obj: Obj) -> Obj:
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return as_table(request, target.rt, [obj] if "name" in obj["metadata"] else [], meta)

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
        if initial_events:  # the current state, at least as new as the version asked for
            lines = [_event_line("ADDED", o, shape) for o in matching(store, target, labels, fields)]
            lines.append(_event_line("BOOKMARK", _bookmark(target, store.resource_version, initial_end=True), shape))
        elif initial_events is False and start_rv is None:  # start at the most recent version, nothing replayed
            lines = []
        elif start_rv is None:
            lines = [_event_line("ADDED", o, shape) for o in matching(store, target, labels, fields)]
        else:
            lines = [
                _event_line(e.type, e.obj, shape)
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
            shape,
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
    shape: Shape | None = None,
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
                await resp.write(_event_line("BOOKMARK", _bookmark(target, current_rv()), shape))
                next_bookmark = time.monotonic() + interval
            continue
        chunk = [_event_line(event.type, event.obj, shape)]
        while not queue.empty():
            queued = queue.get_nowait()
            chunk.append(_event_line(queued.type, queued.obj, shape))
        await resp.write(b"".join(chunk))


def _bookmark(target: Target, resource_version: int, initial_end: bool = False) -> Obj:
    """A BOOKMARK's object: the kind and the version only (plus, ending a streaming list's initial
    events, the annotation saying so)."""
    metadata: Obj = {"resourceVersion": str(resource_version)}
    if initial_end:
        metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"kind": target.rt.kind, "apiVersion": target.rt.api_version, "metadata": metadata}


async def _one_shot(request: web.Request, lines: list[bytes]) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    await resp.prepare(request)
    await resp.write(b"".join(lines))
    await resp.write_eof()
    return resp
