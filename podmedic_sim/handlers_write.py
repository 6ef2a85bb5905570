"""CREATE, UPDATE (PUT), PATCH and DELETE, with validation, conflicts and dry runs."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import secrets
import string
import uuid
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.admission_builtin import admit_builtin
from podmedic_sim.field_validation import settle_unknown_fields, warning_header
from podmedic_sim.handlers_common import ApiError, json_response, success_status
from podmedic_sim.handlers_defaults import (
    apply_create_defaults,
    default_device_taint_times,
    device_taint_rule_update,
    secret_defaults,
)
from podmedic_sim.handlers_read import get_object, matching, selectors
from podmedic_sim.handlers_request import Target, context, dry_run, read_json, read_object
from podmedic_sim.patch_schema import object_schema
from podmedic_sim.patching import apply_patch
from podmedic_sim.store import NotFound, Store, StoreError, now_rfc3339
from podmedic_sim.validation import schema_file, validate_object

_SUFFIX_CHARS = string.ascii_lowercase + string.digits


def _check_identity(target: Target, obj: Obj) -> Obj:
    """Fill kind/apiVersion/namespace from the URL; 400 when the body contradicts them."""
    rt = target.rt
    obj.setdefault("apiVersion", rt.api_version)
    obj.setdefault("kind", rt.kind)
    if obj["apiVersion"] != rt.api_version or obj["kind"] != rt.kind:
        raise ApiError(
            400,
            f"the API version/kind in the body ({obj['apiVersion']}/{obj['kind']})"
            f" does not match the expected {rt.api_version}/{rt.kind}",
        )
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise ApiError(400, "metadata must be an object")
    obj["metadata"] = meta = dict(meta)
    if rt.namespaced:
        if meta.get("namespace") and meta["namespace"] != target.namespace:
            raise ApiError(
                400,
                "the namespace of the provided object does not match the "
                "namespace sent on the request",
            )
        meta["namespace"] = target.namespace
    else:
        meta.pop("namespace", None)
    if target.name is not None and meta.get("name") not in (None, target.name):
        raise ApiError(400, "the name of the object does not match the name on the URL")
    if target.name is not None:
        meta["name"] = target.name
    return obj


def _require_namespace(store: Store, target: Target) -> None:
    if target.rt.namespaced and store.find("namespaces", None, target.namespace or "") is None:
        raise ApiError(
            404,
            f'namespaces "{target.namespace}" not found',
            kind="namespaces",
            name=target.namespace or "",
        )


def _store_call(target: Target, fn: Any, *args: Any, **kwargs: Any) -> Obj:
    try:
        result: Obj = fn(*args, **kwargs)
    except StoreError as exc:
        raise ApiError.from_store(exc, target.rt.plural, target.rt.group) from exc
    return result


async def handle_create(request: web.Request, target: Target) -> web.Response:
    """POST to a collection."""
    store = context(request).store
    if target.rt.namespaced and target.namespace is None:
        raise ApiError(405, "create must name a namespace")
    obj = _check_identity(target, await read_object(request))
    warned = warning_header(settle_unknown_fields(request, target.rt, obj))
    meta = obj["metadata"]
    if meta.get("resourceVersion"):
        raise ApiError(400, "resourceVersion should not be set on objects to be created")
    if not meta.get("name") and meta.get("generateName"):
        suffix = "".join(secrets.choice(_SUFFIX_CHARS) for _ in range(5))
        meta["name"] = f"{meta['generateName']}{suffix}"
    apply_create_defaults(target.rt, obj)
    if target.rt.kind == "Pod":
        admit_builtin(obj)
    admit = context(request).admit_pod
    if admit is not None and target.rt.plural == "pods" and target.namespace is not None:
        obj = await admit(obj, target.namespace, dry_run(request))  # before validation, as upstream
        meta = obj["metadata"]
    validate_object(obj, target.rt.kind, target.rt.plural, target.rt.group, custom=target.rt.custom)
    _require_namespace(store, target)
    if dry_run(request):
        if store.find(target.rt.plural, target.namespace, meta["name"]) is not None:
            raise ApiError(
                409,
                f'{target.rt.plural} "{meta["name"]}" already exists',
                "AlreadyExists",
                kind=target.rt.plural,
                name=meta["name"],
            )
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["creationTimestamp"] = now_rfc3339()
        return json_response(obj, 201, warned)
    return json_response(_store_call(target, store.create, target.rt.plural, obj), 201, warned)


def _merge_for_update(target: Target, old: Obj, new: Obj) -> Obj:
    """Keep the half of the object the endpoint may not change (status vs. the rest)."""
    if "status" not in target.rt.subresources:
        return new
    if target.sub == "status":
        merged = dict(old)
        merged["metadata"] = dict(old["metadata"])
        sent_rv = (new.get("metadata") or {}).get("resourceVersion")
        if sent_rv:
            merged["metadata"]["resourceVersion"] = sent_rv
        if "status" in new:
            merged["status"] = new["status"]
        else:
            merged.pop("status", None)
        return merged
    if "status" in old:
        new["status"] = old["status"]
    else:
        new.pop("status", None)
    return new


def _write(request: web.Request, target: Target, old: Obj, new: Obj) -> Obj:
    store = context(request).store
    new = _merge_for_update(target, old, new)
    if target.sub is None:
        default_device_taint_times(target.rt, new)
        if target.rt.kind == "DeviceTaintRule":
            device_taint_rule_update(old, new)
        elif target.rt.kind == "Secret":
            secret_defaults(new)
    validate_object(new, target.rt.kind, target.rt.plural, target.rt.group, old=old, custom=target.rt.custom)
    if dry_run(request):
        return new
    stored = _store_call(target, store.replace, target.rt.plural, new)
    meta = stored["metadata"]
    if meta.get("deletionTimestamp") and not meta.get("finalizers"):
        return _store_call(target, store.delete, target.rt.plural, target.namespace, meta["name"])
    return stored


async def handle_replace(request: web.Request, target: Target) -> web.Response:
    """PUT an object or its status."""
    new = _check_identity(target, await read_object(request))
    warned = warning_header(settle_unknown_fields(request, target.rt, new))
    old = get_object(context(request).store, target)
    return json_response(_write(request, target, old, new), headers=warned)


async def handle_patch(request: web.Request, target: Target) -> web.Response:
    """PATCH an object or its status in any of the three patch formats."""
    content_type = request.headers.get("Content-Type", "")
    patch = await read_json(request)
    # Read the object only after the body: a write landing while the body was awaited would
    # otherwise make a patch without a resourceVersion fail as a conflict, which it never does.
    old = get_object(context(request).store, target)
    schema = object_schema(schema_file(target.rt.api_version, target.rt.kind))
    new = apply_patch(content_type, old, patch, schema)
    if not isinstance(new, dict):
        raise ApiError(422, "the patch must leave an object")
    new = _check_identity(target, new)
    warned = warning_header(settle_unknown_fields(request, target.rt, new))
    return json_response(_write(request, target, old, new), headers=warned)


def _dependents(store: Store, namespace: str | None, uid: str) -> list[tuple[str, Obj]]:
    found = []
    for plural in ("pods", "resourceclaims", "jobs"):
        for obj in store.iter(plural, namespace):
            refs = obj.get("metadata", {}).get("ownerReferences") or []
            if any(ref.get("uid") == uid for ref in refs):
                found.append((plural, obj))
    return found


def check_preconditions(obj: Obj, options: Obj, target: Target) -> None:
    """409 Conflict when ``options.preconditions`` (UID, resourceVersion) do not match ``obj``, worded as
    k8s.io/apiserver ``storage.Preconditions.Check`` and ``storeerr.InterpretDeleteError`` word it."""
    meta, pre = obj["metadata"], options.get("preconditions") or {}
    for key, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        if pre.get(key) and pre[key] != meta.get(key):
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {target.rt.plural} "{target.name}": Precondition failed: '
                f"{label} in precondition: {pre[key]}, {label} in object meta: {meta.get(key)}",
                kind=target.rt.plural,
                name=target.name or "",
            )


def delete_object(store: Store, target: Target, options: Obj, dry: bool) -> Obj:
    """Delete (or, with finalizers, mark deleted) the addressed object and its dependents."""
    assert target.name is not None
    obj = get_object(store, target)
    meta = obj["metadata"]
    check_preconditions(obj, options, target)
    grace = options.get("gracePeriodSeconds")
    if target.rt.kind == "Pod":
        grace = pod_grace_period(obj, grace)
    if dry:
        return obj
    if target.rt.kind == "Pod" and (grace or meta.get("finalizers")):
        return _terminate(store, target, int(grace or 0))
    if meta.get("finalizers"):

        def mark(o: Obj) -> None:
            o["metadata"].setdefault("deletionTimestamp", now_rfc3339())
            o["metadata"]["deletionGracePeriodSeconds"] = grace if grace is not None else 0

        return _store_call(
            target, store.mutate, target.rt.plural, target.namespace, target.name, mark
        )
    gone = _store_call(target, store.delete, target.rt.plural, target.namespace, target.name)
    default_policy = "Orphan" if target.rt.kind == "Job" else "Background"
    policy = options.get("propagationPolicy") or (
        "Orphan" if options.get("orphanDependents") else default_policy
    )
    if policy in ("Background", "Foreground"):
        for plural, dep in _dependents(store, target.namespace, meta.get("uid", "")):
            with contextlib.suppress(NotFound):
                store.delete(plural, dep["metadata"].get("namespace"), dep["metadata"]["name"])
    result = copy.copy(gone)
    result["metadata"] = {**gone["metadata"], "deletionTimestamp": now_rfc3339()}
    if grace is not None:
        result["metadata"]["deletionGracePeriodSeconds"] = grace
    return result


def pod_grace_period(pod: Obj, requested: int | None) -> int:
    """The grace period a pod's DELETE gets, as kubernetes/kubernetes ``pkg/registry/core/pod/strategy.go``
    (``CheckGracefulDelete``) decides it: the request's, else the pod's ``terminationGracePeriodSeconds``
    (30 when unset: upstream defaults every pod, a controller's too); 0, a deletion at once, for a pod not
    bound to a node or already terminal."""
    spec_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    period = requested if requested is not None else (30 if spec_grace is None else spec_grace)
    if not (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        return 0
    return max(0, int(period or 0))


def _terminate(store: Store, target: Target, grace: int) -> Obj:
    """A graceful pod deletion (``rest.BeforeDelete`` in k8s.io/apiserver ``pkg/registry/rest/delete.go``): the
    pod stays, Terminating, with ``deletionTimestamp`` = now + grace; the kubelet sends SIGTERM, and deletes it
    once its containers stopped (its claims stay reserved until then). A second DELETE may only shorten it."""
    assert target.name is not None
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=grace)

    def mark(o: Obj) -> None:
        m = o["metadata"]
        current = m.get("deletionGracePeriodSeconds")
        if current is None or grace < int(current):  # the finalizers keep a pod deleted with 0 until they go
            m["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
            m["deletionGracePeriodSeconds"] = grace

    return _store_call(target, store.mutate, target.rt.plural, target.namespace, target.name, mark)


async def _delete_options(request: web.Request) -> Obj:
    options: Obj = {}
    if request.can_read_body:
        raw = await request.read()
        if raw.strip():
            options = await read_object(request)
    for key in ("gracePeriodSeconds", "propagationPolicy", "orphanDependents"):
        if key in request.query:
            options[key] = request.query[key]
    if options.get("gracePeriodSeconds") is not None:
        try:
            options["gracePeriodSeconds"] = int(options["gracePeriodSeconds"])
        except (TypeError, ValueError) as exc:
            raise ApiError(400, "gracePeriodSeconds must be an integer") from exc
    if options.get("propagationPolicy") not in (None, "Orphan", "Background", "Foreground"):
        raise ApiError(400, f"unsupported propagationPolicy {options['propagationPolicy']!r}")
    return options


async def handle_delete(request: web.Request, target: Target) -> web.Response:
    """DELETE one object: the object back, or a success ``Status`` for some kinds."""
    options = await _delete_options(request)
    result = delete_object(context(request).store, target, options, dry_run(request))
    if target.rt.delete_returns_status:
        meta = result["metadata"]
        return json_response(
            success_status(meta["name"], target.rt.plural, target.rt.group, meta.get("uid", ""))
        )
    return json_response(result)


async def handle_delete_collection(request: web.Request, target: Target) -> web.Response:
    """DELETE a collection (honouring selectors); answers with the deleted objects' list."""
    store = context(request).store
    if (target.rt.namespaced and target.namespace is None) or target.rt.kind == "Namespace":
        raise ApiError(405, f"deletecollection is not supported here for {target.rt.plural}")
    options = await _delete_options(request)
    labels, fields = selectors(request, target)
    dry = dry_run(request)
    deleted = []
    for obj in list(matching(store, target, labels, fields)):
        meta = obj["metadata"]
        one = Target(target.rt, meta.get("namespace"), meta["name"], None)
        deleted.append(delete_object(store, one, options, dry))
    return json_response(
        {
            "kind": target.rt.list_kind,
            "apiVersion": target.rt.api_version,
            "metadata": {"resourceVersion": str(store.resource_version)},
            "items": deleted,
        }
    )
