"""OpenAPI v3 as kube-apiserver serves it: ``/openapi/v3`` and one document per group-version.

kubectl reads it for two things: whether the server validates fields itself (a PATCH operation of
the kind carrying the ``fieldValidation`` parameter: k8s.io/cli-runtime ``resource/
query_param_verifier_v3.go``; then ``kubectl create``/``apply`` send ``fieldValidation=Strict`` and skip
their own OpenAPI v2 validation), and the schemas ``kubectl explain`` prints (k8s.io/kubectl
``pkg/explain/v2``). The index lists each group-version's ``serverRelativeURL``
(k8s.io/kube-openapi ``pkg/handler3``); a document holds the paths of its resources with their
operations, each marked with ``x-kubernetes-group-version-kind``, and the component schemas they
use. The schemas are upstream's own 1.37 definitions (the non-strict set of ``kubernetes-validate``,
the same the simulator validates with), turned back from JSON Schema into OpenAPI: ``$ref``s point at
``#/components/schemas``, a nullable type list becomes its one type, and the ``apiVersion``/``kind``
enums the JSON Schema generator added are dropped. A kind served as a CRD (JobSet, ...) gets what a
CRD without a published schema would show: its metadata, anything else preserved.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources as importlib_resources
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError, dumps
from podmedic_sim.handlers_request import context
from podmedic_sim.resources import ResourceType, ServedApi

_DEFINITIONS = "kubernetes-json-schema/v1.37.0-local/_definitions.json"
_REF = "#/$defs/"
_COMPONENT = "#/components/schemas/"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_AS_STRING = {"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
              "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"}}
_QUERY = ("dryRun", "fieldManager", "fieldValidation")


@functools.cache
def _definitions() -> dict[str, Any]:
    ref = importlib_resources.files("kubernetes_validate").joinpath(_DEFINITIONS)
    found: dict[str, Any] = json.loads(ref.read_text())["$defs"]
    return found


@functools.cache
def _kinds() -> dict[tuple[str, str, str], str]:
    """(group, version, kind) -> the definition's name, from ``x-kubernetes-group-version-kind``."""
    out = {}
    for name, schema in _definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            out[(gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))] = name
    return out


def _openapi(node: Any) -> Any:
    """A JSON Schema node as an OpenAPI v3 schema."""
    if isinstance(node, list):
        return [_openapi(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            continue
        if key == "type" and isinstance(value, list):
            kinds = [v for v in value if v != "null"]
            out[key] = kinds[0] if len(kinds) == 1 else kinds
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _openapi({k: v for k, v in prop.items() if not (name in ("apiVersion", "kind")
                                                                               and k == "enum")})
                        for name, prop in value.items()}
        else:
            out[key] = _openapi(value)
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF):
        target = {"$ref": _COMPONENT + ref.removeprefix(_REF)}
        return {"allOf": [target], **out} if out else target
    return out


def _references(node: Any, found: set[str]) -> None:
    if isinstance(node, list):
        for n in node:
            _references(n, found)
    elif isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF) and ref.removeprefix(_REF) not in found:
            name = ref.removeprefix(_REF)
            found.add(name)
            _references(_definitions().get(name, {}), found)
        for value in node.values():
            _references(value, found)


def _custom_schema(rt: ResourceType) -> Obj:
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-group-version-kind": [gvk],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"allOf": [{"$ref": _COMPONENT + _OBJECT_META}]}}}


def _custom_name(rt: ResourceType) -> str:
    """A CRD's schema name: its group reversed, then version and kind (``io.x-k8s.jobset.v1alpha2.JobSet``)."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _operation(rt: ResourceType, action: str, schema_ref: str) -> Obj:
    params = [{"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
              for name in _QUERY] if action in ("post", "put", "patch") else []
    return {"operationId": f"{action}{rt.kind}", "tags": [rt.group or "core_v1"], "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
            "parameters": params,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {
                "$ref": schema_ref}}}}}}


def _paths(rt: ResourceType, schema_ref: str) -> Obj:
    base = f"/api/{rt.version}" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    scope = f"{base}/namespaces/{{namespace}}" if rt.namespaced else base
    item = {action: _operation(rt, action, schema_ref) for action in ("get", "put", "patch", "delete")}
    collection = {action: _operation(rt, action, schema_ref) for action in ("get", "post")}
    return {f"{scope}/{rt.plural}": collection, f"{scope}/{rt.plural}/{{name}}": item}


def group_version_document(api: ServedApi, group: str, version: str) -> Obj:
    """The OpenAPI v3 document of one served group-version (404 when it is not served)."""
    served = [rt for rt in api.resources if rt.group == group and rt.version == version]
    if not served:
        raise ApiError(404, "the server could not find the requested resource")
    paths: Obj = {}
    names: set[str] = set()
    customs: Obj = {}
    for rt in served:
        name = _kinds().get((rt.group, rt.version, rt.kind))
        if name is None:
            name = _custom_name(rt)
            customs[name] = _custom_schema(rt)
            names.add(_OBJECT_META)
            _references(_definitions()[_OBJECT_META], names)
        else:
            names.add(name)
            _references(_definitions()[name], names)
        paths.update(_paths(rt, _COMPONENT + name))
    schemas = {name: _openapi({**_definitions()[name], **_AS_STRING.get(name, {})}) for name in sorted(names)}
    for name in _AS_STRING:
        if name in schemas:
            schemas[name].pop("oneOf", None)
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.37.0"}, "paths": paths,
            "components": {"schemas": {**schemas, **customs}}}


def _path_of(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


async def index(request: web.Request) -> web.Response:
    """GET /openapi/v3: each served group-version and where its document is."""
    api = context(request).api
    paths = {}
    for group, version in api.group_versions():
        path = _path_of(group, version)
        digest = hashlib.sha512(f"{path}:{api.taint_rules}".encode()).hexdigest().upper()[:128]
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return web.Response(body=dumps({"paths": paths}), content_type="application/json")


async def document(request: web.Request) -> web.Response:
    """GET /openapi/v3/api/<version> or /openapi/v3/apis/<group>/<version>."""
    parts = request.match_info["path"].strip("/").split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        raise ApiError(404, "the server could not find the requested resource")
    body = _document_bytes(context(request).api, group, version)
    return web.Response(body=body, content_type="application/json")


@functools.lru_cache(maxsize=64)
def _document_bytes(api: ServedApi, group: str, version: str) -> bytes:
    return dumps(group_version_document(api, group, version))
