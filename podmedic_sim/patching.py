"""The three patch formats the client sends: JSON merge, strategic merge and JSON patch.

A strategic merge follows each field's patch strategy and merge key as the upstream OpenAPI
declares them (``podmedic_sim.patch_schema``): maps merge recursively, ``null`` deletes a key,
lists with strategy ``merge`` merge by their merge key (or as a set for scalars), every other
list is replaced whole; the directives ``$patch: delete|replace``,
``$deleteFromPrimitiveList/<field>``, ``$setElementOrder/<field>`` and ``$retainKeys`` work.
"""

from __future__ import annotations

import json
from typing import Any

from podmedic_sim.handlers_common import ApiError
from podmedic_sim.patch_schema import FieldPatch, SchemaNode
from podmedic_sim.store import json_copy

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH)


def apply_patch(content_type: str, target: Any, patch: Any, schema: SchemaNode | None = None) -> Any:
    """Apply ``patch`` of ``content_type`` to a copy of ``target`` and return the result;
    ``schema`` is the object's type, which a strategic merge patch follows."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == JSON_PATCH:
        return json_patch(target, patch)
    if ctype == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise ApiError(400, "a merge patch must be a JSON object")
        return merge_patch(target, patch)
    if ctype == STRATEGIC_PATCH:
        if not isinstance(patch, dict):
            raise ApiError(400, "a strategic merge patch must be a JSON object")
        return strategic_merge(target, patch, schema)
    raise ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(PATCH_TYPES)}",
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge(target: Any, patch: dict[str, Any], schema: SchemaNode | None) -> Any:
    """Kubernetes strategic merge patch of a map whose type is ``schema``.

    Each field merges by its patch strategy in the upstream OpenAPI (``patch_schema``); a
    field the schema does not describe merges like a JSON merge patch (maps recurse, lists
    are replaced), which is what the API server does for it.
    """
    if patch.get("$patch") == "replace":
        return {k: json_copy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return {}
    out = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = value if isinstance(value, list) else []
            out[field] = [v for v in out.get(field) or [] if v not in drop]
            continue
        how = schema.field(key) if schema is not None else FieldPatch()
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = strategic_merge(out.get(key), value, how.schema)
        elif isinstance(value, list):
            out[key] = _merge_list(how, out.get(key), value)
        else:
            out[key] = value
    for key, order in patch.items():
        if key.startswith("$setElementOrder/") and isinstance(order, list):
            field = key.split("/", 1)[1]
            how = schema.field(field) if schema is not None else FieldPatch()
            if isinstance(out.get(field), list):
                out[field] = _ordered(out[field], order, how.merge_key)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _without_directives(items: list[Any]) -> list[Any]:
    return [p for p in json_copy(items) if not (isinstance(p, dict) and "$patch" in p)]


def _merge_list(how: FieldPatch, existing: Any, patch: list[Any]) -> list[Any]:
    current: list[Any] = existing if isinstance(existing, list) else []
    if not how.merge:
        return _without_directives(patch)
    if how.merge_key is None:  # a list of scalars merged as a set (e.g. finalizers)
        return _go_order(current + [v for v in patch if v not in current], patch, current, None)
    key = how.merge_key
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return _without_directives(patch)
    out = list(current)
    for item in patch:
        if not isinstance(item, dict):
            raise ApiError(422, f"a list merged by {key!r} takes objects, not {item!r}")
        index = next(
            (i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item.get(key)),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append(strategic_merge({}, item, how.schema))
        else:
            out[index] = strategic_merge(out[index], item, how.schema)
    return _go_order(out, [p for p in patch if p.get("$patch") != "delete"], current, key)


def _go_order(merged: list[Any], patch: list[Any], original: list[Any], key: str | None) -> list[Any]:
    """The order k8s.io/apimachinery ``strategicpatch`` gives a merged list (``mergeSlice`` then
    ``normalizeElementOrder``/``mergeSortedSlice``): the patch's items in the patch's order, the others
    in the live order, interleaved where the live list orders both; a new item goes before a live one."""

    def ident(item: Any) -> str:
        return json.dumps(item.get(key) if key is not None and isinstance(item, dict) else item, sort_keys=True)

    wanted = [ident(p) for p in patch]
    live = {ident(o): n for n, o in enumerate(original)}
    patched = sorted((m for m in merged if ident(m) in wanted), key=lambda m: wanted.index(ident(m)))
    server_only = sorted((m for m in merged if ident(m) not in wanted), key=lambda m: live.get(ident(m), len(live)))
    out, i, j = [], 0, 0
    while i < len(server_only) or j < len(patched):
        if j >= len(patched) or (i < len(server_only) and ident(patched[j]) in live
                                 and live[ident(server_only[i])] < live[ident(patched[j])]):
            out.append(server_only[i])
            i += 1
        else:
            out.append(patched[j])
            j += 1
    return out


def _ordered(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    """``$setElementOrder``: the listed elements first, in the given order, then the rest."""

    def ident(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    rank = {json.dumps(w, sort_keys=True): n for n, w in enumerate(wanted)}
    return sorted(items, key=lambda it: rank.get(json.dumps(ident(it), sort_keys=True), len(rank)))


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise ApiError(400, f"invalid JSON pointer {path!r}")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise ApiError(422, f"jsonpatch: path segment {part!r} not found")
    return cur, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise ApiError(422, f"jsonpatch: path {'/'.join(parts)!r} not found")


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise ApiError(422, f"jsonpatch: cannot remove missing path {'/'.join(parts)!r}")


def _add(doc: Any, parts: list[str], value: Any, replace: bool = False) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, f"jsonpatch: cannot replace missing key {last!r}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise ApiError(422, f"jsonpatch: index {last!r} out of range")
    else:
        raise ApiError(422, f"jsonpatch: cannot add to a {type(parent).__name__}")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise ApiError(400, "a JSON patch must be a JSON array of operations")
    doc = json_copy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise ApiError(400, f"invalid JSON patch operation {op!r}")
        name, parts = op["op"], _pointer(op.get("path"))
        if name in ("add", "replace", "test") and "value" not in op:
            raise ApiError(400, f"JSON patch operation {name!r} needs a value")
        if name == "add":
            doc = _add(doc, parts, json_copy(op["value"]))
        elif name == "replace":
            _get(doc, parts)
            doc = _add(doc, parts, json_copy(op["value"]), replace=True)
        elif name == "remove":
            _remove(doc, parts)
        elif name in ("move", "copy"):
            source = _pointer(op.get("from"))
            value = _remove(doc, source) if name == "move" else json_copy(_get(doc, source))
            doc = _add(doc, parts, value)
        elif name == "test":
            if _get(doc, parts) != op["value"]:
                raise ApiError(422, f"jsonpatch: test failed at {op.get('path')!r}")
        else:
            raise ApiError(400, f"unknown JSON patch operation {name!r}")
    return doc
