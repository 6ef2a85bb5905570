"""GET of one object and LIST of collections, with selectors and ``limit``/``continue``."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, json_response
from podmedic_sim.handlers_request import Target, context, query_int
from podmedic_sim.selectors import Predicate, parse_field_selector, parse_label_selector
from podmedic_sim.store import NotFound, Store


def get_object(store: Store, target: Target) -> Obj:
    """The addressed object; 404 as a Kubernetes ``Status`` when missing."""
    assert target.name is not None
    try:
        return store.get(target.rt.plural, target.namespace, target.name)
    except NotFound as exc:
        raise ApiError.from_store(exc, target.rt.plural, target.rt.group) from exc


async def handle_get(request: web.Request, target: Target) -> web.Response:
    """GET an object or its status subresource."""
    return json_response(get_object(context(request).store, target))


def selectors(request: web.Request, target: Target) -> tuple[Predicate | None, Predicate | None]:
    """The compiled label and field selectors of the request (400 when malformed)."""
    labels = parse_label_selector(request.query.get("labelSelector"))
    fields = parse_field_selector(request.query.get("fieldSelector"), target.rt.kind)
    return labels, fields


def matching(
    store: Store, target: Target, labels: Predicate | None, fields: Predicate | None
) -> Iterator[Obj]:
    """Objects of the collection that pass both selectors."""
    for obj in store.iter(target.rt.plural, target.namespace):
        if (labels is None or labels(obj)) and (fields is None or fields(obj)):
            yield obj


def _decode_continue(token: str) -> int:
    try:
        offset = int(base64.urlsafe_b64decode(token.encode()).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ApiError(400, "continue key is not valid: illegal base64 data") from exc
    if offset < 0:
        raise ApiError(400, "continue key is not valid")
    return offset


async def handle_list(request: web.Request, target: Target) -> web.Response:
    """LIST a collection, cluster-wide or in one namespace."""
    store = context(request).store
    labels, fields = selectors(request, target)
    limit = query_int(request, "limit")
    token = request.query.get("continue")
    offset = _decode_continue(token) if token else 0
    items = list(matching(store, target, labels, fields))
    meta: Obj = {"resourceVersion": str(store.resource_version)}
    if limit is not None and limit > 0:
        page = items[offset : offset + limit]
        rest = len(items) - offset - len(page)
        if rest > 0:
            meta["continue"] = base64.urlsafe_b64encode(str(offset + limit).encode()).decode()
            meta["remainingItemCount"] = rest
        items = page
    elif offset:
        items = items[offset:]
    body = {
        "kind": target.rt.list_kind,
        "apiVersion": target.rt.api_version,
        "metadata": meta,
        "items": items,
    }
    return json_response(body)
