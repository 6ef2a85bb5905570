"""The protobuf request bodies kubectl sends, read as JSON.

client-go's typed clients send built-in kinds as ``application/vnd.kubernetes.protobuf``: the bytes
``k8s\\x00`` then a ``runtime.Unknown`` (k8s.io/apimachinery ``pkg/runtime/generated.proto``: typeMeta 1,
raw 2) whose ``raw`` is the object's own message. ``kubectl create token`` sends a TokenRequest,
``kubectl auth can-i``/``whoami`` a SelfSubjectAccessReview/SelfSubjectReview, and ``kubectl create
namespace``/``secret``/``configmap`` the object this way; the fields read are those of kubernetes/api
``authentication/v1``, ``authorization/v1`` and ``core/v1`` ``generated.proto``, and of ObjectMeta
(name 1, generateName 2, namespace 3, labels 11, annotations 12) and DeleteOptions in
k8s.io/apimachinery ``pkg/apis/meta/v1/generated.proto``. The answer is JSON, which client-go decodes
by its content type. Any other protobuf body stays a 415.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError

MAGIC = b"k8s\x00"
Fields = dict[int, list[int | bytes]]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise ApiError(400, "the protobuf body is truncated")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> Fields:
    """A message's fields by number (varints as ints, length-delimited as bytes); 400 when malformed."""
    out: Fields = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            out.setdefault(number, []).append(value)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ApiError(400, "the protobuf body is truncated")
            out.setdefault(number, []).append(data[at:at + size])
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ApiError(400, f"the protobuf body has an unsupported wire type {wire}")
    return out


def _text(found: Fields, number: int) -> str:
    values = found.get(number) or []
    return values[-1].decode() if values and isinstance(values[-1], bytes) else ""


def _message(found: Fields, number: int) -> Fields:
    values = found.get(number) or []
    return fields(values[-1]) if values and isinstance(values[-1], bytes) else {}


def _token_request(raw: Fields) -> Obj:
    spec = _message(raw, 2)
    seconds = [v for v in spec.get(4) or [] if isinstance(v, int)]
    out: Obj = {"audiences": [v.decode() for v in spec.get(1) or [] if isinstance(v, bytes)]}
    if seconds:
        out["expirationSeconds"] = seconds[-1]
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": out}


def _access_review(raw: Fields) -> Obj:
    spec = _message(raw, 2)
    if 1 in spec:
        attrs = _message(spec, 1)
        names = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
        wanted: Obj = {"resourceAttributes": {n: _text(attrs, i) for i, n in enumerate(names, 1) if _text(attrs, i)}}
    else:
        attrs = _message(spec, 2)
        wanted = {"nonResourceAttributes": {"path": _text(attrs, 1), "verb": _text(attrs, 2)}}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": wanted}


def _self_review(raw: Fields) -> Obj:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def _map(found: Fields, number: int) -> dict[str, bytes]:
    """A ``map<string, ...>`` field: repeated entries of key 1 and value 2."""
    out: dict[str, bytes] = {}
    for entry in found.get(number) or []:
        if isinstance(entry, bytes):
            pair = fields(entry)
            value = (pair.get(2) or [b""])[-1]
            out[_text(pair, 1)] = value if isinstance(value, bytes) else b""
    return out


def _strings(found: Fields, number: int) -> dict[str, str]:
    return {k: v.decode() for k, v in _map(found, number).items()}


def _object_meta(raw: Fields) -> Obj:
    meta = _message(raw, 1)
    out: Obj = {key: _text(meta, number) for key, number in (("name", 1), ("generateName", 2), ("namespace", 3))
                if _text(meta, number)}
    for key, number in (("labels", 11), ("annotations", 12)):
        if values := _strings(meta, number):
            out[key] = values
    return out


def _flag(found: Fields, number: int) -> bool | None:
    values = [v for v in found.get(number) or [] if isinstance(v, int)]
    return bool(values[-1]) if values else None


def _core(kind: str, raw: Fields) -> Obj:
    return {"apiVersion": "v1", "kind": kind, "metadata": _object_meta(raw)}


def _namespace(raw: Fields) -> Obj:
    return _core("Namespace", raw)


def _secret(raw: Fields) -> Obj:
    out = _core("Secret", raw)
    if data := _map(raw, 2):
        out["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
    if strings := _strings(raw, 4):
        out["stringData"] = strings
    if kind := _text(raw, 3):
        out["type"] = kind
    if (immutable := _flag(raw, 5)) is not None:
        out["immutable"] = immutable
    return out


def _config_map(raw: Fields) -> Obj:
    out = _core("ConfigMap", raw)
    if data := _strings(raw, 2):
        out["data"] = data
    if binary := _map(raw, 3):
        out["binaryData"] = {k: base64.b64encode(v).decode() for k, v in binary.items()}
    if (immutable := _flag(raw, 4)) is not None:
        out["immutable"] = immutable
    return out


def _delete_options(raw: Fields) -> Obj:
    """meta/v1 DeleteOptions: gracePeriodSeconds 1, preconditions 2 (uid 1, resourceVersion 2),
    orphanDependents 3, propagationPolicy 4, dryRun 5 (Helm deletes its release Secrets this way)."""
    out: Obj = {}
    grace = [v for v in raw.get(1) or [] if isinstance(v, int)]
    if grace:
        out["gracePeriodSeconds"] = grace[-1]
    if 2 in raw:
        pre = _message(raw, 2)
        out["preconditions"] = {k: _text(pre, n) for k, n in (("uid", 1), ("resourceVersion", 2)) if _text(pre, n)}
    if (orphan := _flag(raw, 3)) is not None:
        out["orphanDependents"] = orphan
    if policy := _text(raw, 4):
        out["propagationPolicy"] = policy
    if dry := [v.decode() for v in raw.get(5) or [] if isinstance(v, bytes)]:
        out["dryRun"] = dry
    return out


READERS: dict[str, Callable[[Fields], Obj]] = {
    "TokenRequest": _token_request, "SelfSubjectAccessReview": _access_review, "SelfSubjectReview": _self_review,
    "Namespace": _namespace, "Secret": _secret, "ConfigMap": _config_map, "DeleteOptions": _delete_options}


def read_protobuf(body: bytes) -> Obj:
    """The JSON form of a protobuf-encoded kind of ``READERS``; 415 for any other kind."""
    if not body.startswith(MAGIC):
        raise ApiError(400, "the protobuf body does not start with the Kubernetes magic number")
    envelope = fields(body[len(MAGIC):])
    kind = _text(_message(envelope, 1), 2)
    reader = READERS.get(kind)
    if reader is None:
        raise ApiError(415, "the body of the request was in an unknown format: application/vnd.kubernetes.protobuf")
    raw = envelope.get(2) or [b""]
    return reader(fields(raw[-1]) if isinstance(raw[-1], bytes) else {})
