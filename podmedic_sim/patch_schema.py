"""Each field's strategic-merge patch strategy, read from the upstream OpenAPI of its type.

The API server merges a strategic merge patch by the ``patchStrategy`` and ``patchMergeKey``
tags of the Go API types (k8s.io/api, e.g. core/v1/types.go: ``SchedulingGates
[]PodSchedulingGate `patchStrategy:"merge" patchMergeKey:"name"```), published in the OpenAPI
as ``x-kubernetes-patch-strategy`` and ``x-kubernetes-patch-merge-key``. The 1.37 strict
schemas that ``kubernetes-validate`` ships carry those extensions; this module reads them
there instead of keeping a hand-made list, so a list without a strategy (e.g.
``status.containerStatuses``, ``x-kubernetes-list-type: atomic``) is replaced whole, as the
real server does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from podmedic_sim.validation import load_schema

_DEFS_MARK = "#/$defs/"


@dataclass(frozen=True)
class FieldPatch:
    """How a patch of one field merges: ``schema`` is the field's value type (for a list, its
    items' type), or ``None`` where the schema says nothing more."""

    schema: SchemaNode | None = None
    merge: bool = False
    merge_key: str | None = None
    retain_keys: bool = False


class SchemaNode:
    """One object type of the OpenAPI, asked field by field."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    def field(self, name: str) -> FieldPatch:
        """The patch strategy of field ``name`` (a map's values share one)."""
        props = self._raw.get("properties") or {}
        prop = props.get(name)
        if prop is None:
            extra = self._raw.get("additionalProperties")
            return FieldPatch(_node(extra) if isinstance(extra, dict) else None)
        strategy = str(prop.get("x-kubernetes-patch-strategy") or "").split(",")
        value = prop.get("items") if "items" in prop else prop
        return FieldPatch(
            schema=_node(value) if isinstance(value, dict) else None,
            merge="merge" in strategy,
            merge_key=prop.get("x-kubernetes-patch-merge-key"),
            retain_keys="retainKeys" in strategy,
        )


def _node(prop: dict[str, Any]) -> SchemaNode | None:
    ref = prop.get("$ref")
    if isinstance(ref, str) and _DEFS_MARK in ref:
        return _definition(ref.split(_DEFS_MARK, 1)[1])
    if prop.get("properties") or prop.get("additionalProperties"):
        return SchemaNode(prop)
    return None


@functools.cache
def _definition(name: str) -> SchemaNode | None:
    raw = (load_schema("_definitions.json").get("$defs") or {}).get(name)
    return SchemaNode(raw) if isinstance(raw, dict) else None


@functools.cache
def object_schema(schema_file: str) -> SchemaNode | None:
    """The schema of a kind by its schema file name (``pod-v1.json``); ``None`` if there is none."""
    try:
        raw = load_schema(schema_file)
    except (FileNotFoundError, OSError):
        return None
    return SchemaNode(raw)
