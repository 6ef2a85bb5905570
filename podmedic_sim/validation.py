"""Validation of objects against the Kubernetes 1.37 strict schemas, plus semantic checks.

The JSON schemas shipped by ``kubernetes-validate`` catch unknown fields and wrong types;
they lack the enums and name rules the real API server enforces, which ``semantic_causes``
adds for the fields podmedic and its workloads touch. Compiled validators are cached per
kind: building one costs far more than validating an object with it.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources as importlib_resources
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from referencing import Registry, Resource

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, Cause
from podmedic_sim.validation_rules import name_causes, semantic_causes
from podmedic_sim.validation_update import update_causes

K8S_VERSION = "1.37.0"
_SCHEMA_DIR = f"kubernetes-json-schema/v{K8S_VERSION}-local-strict"
MAX_CAUSES = 20


@functools.cache
def load_schema(name: str) -> Any:
    """A schema file of the strict set, parsed once (callers must not change it)."""
    ref = importlib_resources.files("kubernetes_validate").joinpath(f"{_SCHEMA_DIR}/{name}")
    return json.loads(ref.read_text())


def schema_file(api_version: str, kind: str) -> str:
    """The schema file of a kind: ``pod-v1.json``, ``devicetaintrule-resource-v1.json``."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@functools.cache
def _registry() -> Registry[Any]:
    defs: Registry[Any] = Resource.from_contents(load_schema("_definitions.json")) @ Registry()
    return defs


@functools.cache
def validator_for(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """The compiled strict validator of ``kind`` (cached); 422 when no schema exists."""
    try:
        schema = load_schema(schema_file(api_version, kind))
    except (FileNotFoundError, OSError) as exc:
        raise ApiError(422, f"no schema for {kind} {api_version}") from exc
    registry = Resource.from_contents(schema) @ _registry()
    cls = jsonschema.validators.Draft202012Validator
    validator: jsonschema.protocols.Validator = cls(schema, registry=registry)
    return validator


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def custom_causes(obj: Obj) -> list[Cause]:
    """What the API server checks of any custom object: apiVersion/kind present, metadata an object,
    spec and status objects when given (a structural schema's root types)."""
    causes = [Cause("FieldValueRequired", "Required value", field) for field in ("apiVersion", "kind")
              if not obj.get(field)]
    for field in ("metadata", "spec", "status"):
        if field in obj and not isinstance(obj[field], dict):
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {field} must be of type object", field))
    return causes


def schema_causes(obj: Obj) -> list[Cause]:
    """Causes for every way ``obj`` fails its strict schema (at most ``MAX_CAUSES``)."""
    validator = validator_for(str(obj.get("apiVersion")), str(obj.get("kind")))
    causes: list[Cause] = []
    for err in validator.iter_errors(obj):
        base = _path(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = (
                set((err.schema or {}).get("properties", {}))
                if isinstance(err.schema, dict)
                else set()
            )
            for extra in sorted(set(err.instance) - known):
                field = f"{base}.{extra}" if base else extra
                causes.append(Cause("FieldValueInvalid", f'unknown field "{field}"', field))
        elif err.validator == "required":
            causes.append(Cause("FieldValueRequired", f"Required value: {err.message}", base))
        elif err.validator == "enum":
            causes.append(
                Cause("FieldValueNotSupported", f"Unsupported value: {err.message}", base)
            )
        else:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {err.message}", base))
        if len(causes) >= MAX_CAUSES:
            break
    return causes


def validate_object(obj: Obj, kind: str, plural: str, group: str = "", old: Obj | None = None, *,
                    custom: bool = False) -> None:
    """Raise 422 Invalid with all causes when ``obj`` fails schema or semantic checks, or, as an
    update of ``old``, an update rule. A ``custom`` resource (served by a CRD, which the strict
    built-in schemas do not cover) gets the API server's checks for every custom object: its
    metadata, and ``spec``/``status`` being objects; its CRD's own schema is not applied."""
    causes = custom_causes(obj) if custom else schema_causes(obj)
    causes += name_causes(obj, kind)
    if not causes:
        causes += semantic_causes(obj, kind)
    if not causes and old is not None:
        causes += update_causes(old, obj, kind)
    if causes:
        name = (obj.get("metadata") or {}).get("name") or ""
        detail = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
        summary = detail if len(causes) == 1 else f"[{detail}]"
        raise ApiError(
            422,
            f'{kind} "{name}" is invalid: {summary}',
            kind=kind,
            name=name,
            group=group,
            causes=causes,
        )
