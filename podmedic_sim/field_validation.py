"""Server-side field validation: what a write does with fields its kind does not declare.

``fieldValidation`` (KEP-2885, GA in 1.27; k8s.io/apiserver ``pkg/endpoints/handlers/rest.go``
``fieldValidation``): ``Strict`` refuses the write, 400 BadRequest ``<Kind> in version "<v>" cannot be
handled as a <Kind>: strict decoding error: unknown field "spec.x", unknown field "spec.y"`` (the
strict JSON decoder's words, k8s.io/apimachinery ``runtime/serializer/json``); ``Warn`` (the default
when the request names none) drops them and answers a ``Warning: 299 - "unknown field \\"spec.x\\""``
header each; ``Ignore`` drops them silently. Another value is a 400. Custom resources are not
checked here: the simulator applies no CRD schema (docs/simulator.md).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError
from podmedic_sim.resources import ResourceType
from podmedic_sim.validation import load_schema, schema_file

DIRECTIVES = ("Ignore", "Warn", "Strict")


def directive(request: web.Request) -> str:
    """The request's ``fieldValidation``, ``Warn`` when absent; 400 for a value upstream does not know."""
    value = request.query.get("fieldValidation", "") or "Warn"
    if value not in DIRECTIVES:
        raise ApiError(400, f"fieldValidation: Unsupported value: {value!r}: supported values: "
                            f"{', '.join(repr(d) for d in DIRECTIVES)}")
    return value


def _field(path: list[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _resolved(schema: Any) -> Any:
    """``schema`` with its ``$ref`` to the shared definitions followed."""
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str) and "#/$defs/" in ref:
        return (load_schema("_definitions.json").get("$defs") or {}).get(ref.split("#/$defs/", 1)[1], {})
    return schema


def _walk(node: Any, schema: Any, path: list[Any], found: list[list[Any]]) -> None:
    """Collect the paths of keys ``schema`` does not declare under ``node``; only names are compared (the
    schema's own checks of types and values are validation's), which keeps a write's cost to one walk."""
    schema = _resolved(schema)
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(node, dict):
        known, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, value in node.items():
            if isinstance(known, dict) and key in known:
                _walk(value, known[key], [*path, key], found)
            elif isinstance(extra, dict):
                _walk(value, extra, [*path, key], found)
            elif isinstance(known, dict):
                found.append([*path, key])
    elif isinstance(node, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(node):
            _walk(item, schema["items"], [*path, index], found)


def unknown_fields(obj: Obj) -> list[list[Any]]:
    """The paths (keys and indexes) of every field ``obj``'s kind does not declare; 422 when the kind has
    no schema."""
    try:
        schema = load_schema(schema_file(str(obj.get("apiVersion")), str(obj.get("kind"))))
    except (FileNotFoundError, OSError) as exc:
        raise ApiError(422, f"no schema for {obj.get('kind')} {obj.get('apiVersion')}") from exc
    found: list[list[Any]] = []
    _walk(obj, schema, [], found)
    return found


def _drop(obj: Obj, path: list[Any]) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node[part]
    node.pop(path[-1], None)


def settle_unknown_fields(request: web.Request, rt: ResourceType, obj: Obj) -> list[str]:
    """Refuse or drop the undeclared fields of ``obj`` as the request's directive says; returns the
    warnings to answer with."""
    if rt.custom or not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
        return []
    how = directive(request)
    try:
        paths = unknown_fields(obj)
    except ApiError:
        return []  # a kind with no schema: validation says so
    if not paths:
        return []
    words = [f'unknown field "{_field(p)}"' for p in paths]
    if how == "Strict":
        raise ApiError(400, f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding '
                            f"error: {', '.join(words)}")
    for path in sorted(paths, key=len, reverse=True):
        _drop(obj, path)
    return words if how == "Warn" else []


def warning_header(warnings: list[str]) -> dict[str, str]:
    """The ``Warning`` header carrying ``warnings`` (RFC 7234 code 299, as the API server sends them)."""
    # A warning with a control character is not sent (k8s.io/apimachinery util/net NewWarningHeader refuses it).
    sendable = [w for w in warnings if w.isprintable()]
    if not sendable:
        return {}
    quoted = [w.replace("\\", "\\\\").replace('"', '\\"') for w in sendable]
    return {"Warning": ", ".join(f'299 - "{w}"' for w in quoted)}
