"""The three patch formats the client sends: JSON merge, strategic merge and JSON patch.

Strategic merge covers what Kubernetes objects need in practice: maps merge recursively,
``null`` deletes a key, lists of named things (containers, conditions, env, ...) merge by
their merge key, ``$patch: delete``/``replace`` directives work, other lists are replaced.
"""

from __future__ import annotations

from typing import Any

from podmedic_sim.handlers_common import ApiError
from podmedic_sim.store import json_copy

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH)

# Field name -> merge key of its list items (patchMergeKey in the Kubernetes API types).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "conditions": "type",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "resourceClaims": "name",
    "resourceClaimStatuses": "name",
    "allocatedResourcesStatus": "name",
    "hostAliases": "ip",
    "addresses": "type",
    "reservedFor": "uid",
}
# Lists of scalars that merge as sets (patchStrategy: merge).
MERGED_SCALAR_LISTS = {"finalizers"}


def apply_patch(content_type: str, target: Any, patch: Any) -> Any:
    """Apply ``patch`` of ``content_type`` to a copy of ``target`` and return the result."""
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
        return strategic_merge(target, patch)
    raise ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(PATCH_TYPES)}",
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


def strategic_merge(target: Any, patch: dict[str, Any]) -> Any:
    """Kubernetes strategic merge patch of a map."""
    if patch.get("$patch") == "replace":
        return {k: json_copy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return {}
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = value if isinstance(value, list) else []
            out[field] = [v for v in out.get(field) or [] if v not in drop]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = strategic_merge(out.get(key), value)
        elif isinstance(value, list):
            out[key] = _merge_list(key, out.get(key), value)
        else:
            out[key] = value
    return out


def _merge_list(field: str, existing: Any, patch: list[Any]) -> list[Any]:
    current: list[Any] = existing if isinstance(existing, list) else []
    if field in MERGED_SCALAR_LISTS:
        return current + [v for v in patch if v not in current]
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(p, dict) for p in patch):
        return [p for p in json_copy(patch) if not (isinstance(p, dict) and "$patch" in p)]
    out = list(current)
    for item in patch:
        if item.get("$patch") == "replace":
            return [{k: v for k, v in p.items() if k != "$patch"} for p in json_copy(patch)]
        key_value = item.get(merge_key)
        index = next(
            (
                i
                for i, cur in enumerate(out)
                if isinstance(cur, dict) and cur.get(merge_key) == key_value
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append(strategic_merge({}, item))
        else:
            out[index] = strategic_merge(out[index], item)
    return out


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
