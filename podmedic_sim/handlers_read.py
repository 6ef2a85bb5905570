"""GET of one object and LIST of collections, with selectors and ``limit``/``continue``."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, json_response
from podmedic_sim.handlers_request import Target, context, query_int
from podmedic_sim.selectors import Predicate, parse_field_selector, parse_label_selector
from podmedic_sim.store import NotFound, Store
from podmedic_sim.tables import as_table, wants_table


def get_object(store: Store, target: Target) -> Obj:
    """The addressed object; 404 as a Kubernetes ``Status`` when missing."""
    assert target.name is not None
    try:
        return store.get(target.rt.plural, target.namespace, target.name)
    except NotFound as exc:
        raise ApiError.from_store(exc, target.rt.plural, target.rt.group) from exc


async def handle_get(request: web.Request, target: Target) -> web.Response:
    """GET an object or its status subresource (a one-row Table when the client asks for one)."""
    obj = get_object(context(request).store, target)
    if wants_table(request):
        return json_response(as_table(request, target.rt, [obj], {"resourceVersion": obj["metadata"].get(
            "resourceVersion", "")}))
    return json_response(obj)


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


def _key(obj: Obj) -> str:
    """An object's place in a list: its storage key's order (namespace, then name), as etcd lists."""
    meta = obj["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


def _decode_continue(token: str) -> tuple[str, str]:
    """The list version and the last key a continue token carries (400 when it is not one)."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()).decode())
        return str(decoded["rv"]), str(decoded["start"])
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise ApiError(400, "continue key is not valid: illegal base64 data") from exc


async def handle_list(request: web.Request, target: Target) -> web.Response:
    """LIST a collection, cluster-wide or in one namespace. Pages (``limit``) follow the storage key, and a
    ``continue`` token carries the first page's version and the last key served (k8s.io/apiserver
    ``storage/etcd3`` ``encodeContinue``): the next page starts after that key, so an object deleted
    between pages hides no other, and every page reports the first page's resourceVersion."""
    store = context(request).store
    labels, fields = selectors(request, target)
    limit = query_int(request, "limit")
    token = request.query.get("continue")
    version, after = _decode_continue(token) if token else (str(store.resource_version), "")
    items = list(matching(store, target, labels, fields))
    meta: Obj = {"resourceVersion": version}
    if token or (limit is not None and limit > 0):
        items = [o for o in sorted(items, key=_key) if _key(o) > after]
    if limit is not None and 0 < limit < len(items):
        page, rest = items[:limit], len(items) - limit
        last = {"rv": version, "start": _key(page[-1])}
        meta["continue"] = base64.urlsafe_b64encode(json.dumps(last).encode()).decode()
        meta["remainingItemCount"] = rest
        items = page
    if wants_table(request):
        return json_response(as_table(request, target.rt, items, meta))
    body = {
        "kind": target.rt.list_kind,
        "apiVersion": target.rt.api_version,
        "metadata": meta,
        "items": items,
    }
    return json_response(body)
