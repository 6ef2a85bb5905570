"""A pod's checkpoint declaration, read from its annotations and validated (no I/O).

Annotations (see docs/checkpoint-protocol.md):

- ``podmedic.io/checkpoint-method``: ``annotation``, ``http``, ``kubelet`` or ``none``;
- ``podmedic.io/checkpoint-port`` (http, default 8471) and ``podmedic.io/checkpoint-path``
  (http, default ``/podmedic/checkpoint``);
- ``podmedic.io/checkpoint-containers`` (kubelet, comma-separated; default every container).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from podmedic.workload.protocol import DEFAULT_PATH, DEFAULT_PORT, METHOD, PATH, PORT

CONTAINERS = "podmedic.io/checkpoint-containers"
METHODS = ("annotation", "http", "kubelet", "none")

_PATH_OK = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")
_NAME_OK = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class BadDeclaration(ValueError):
    """A checkpoint annotation has a value podmedic cannot use; names the annotation and why."""

    def __init__(self, annotation: str, reason: str) -> None:
        super().__init__(f"{annotation}: {reason}")
        self.annotation = annotation
        self.reason = reason


@dataclass(frozen=True)
class MethodSpec:
    """How to ask one pod for a checkpoint."""

    method: str
    port: int = DEFAULT_PORT
    path: str = DEFAULT_PATH
    containers: tuple[str, ...] = ()


def _port(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_PORT
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise BadDeclaration(PORT, f"{value!r} is not a port number (1-65535)")
    return int(value)


def _path(value: str | None) -> str:
    if value is None or value == "":
        return DEFAULT_PATH
    if not _PATH_OK.match(value) or "/../" in f"{value}/" or "//" in value:
        raise BadDeclaration(PATH, f"{value!r} is not an absolute URL path without '..', '//', query or spaces")
    return value


def _containers(value: str | None, known: list[str]) -> tuple[str, ...]:
    if value is None or value.strip() == "":
        if not known:
            raise BadDeclaration(CONTAINERS, "the pod has no containers to checkpoint")
        return tuple(known)
    names = tuple(n.strip() for n in value.split(","))
    for name in names:
        if not _NAME_OK.match(name):
            raise BadDeclaration(CONTAINERS, f"{name!r} is not a container name")
        if known and name not in known:
            raise BadDeclaration(CONTAINERS, f"container {name!r} is not in the pod (it has {', '.join(known)})")
    return names


def parse(annotations: dict[str, str], containers: list[str]) -> MethodSpec | None:
    """The pod's checkpoint method; ``None`` when it declares none.

    Raises:
        BadDeclaration: an unknown method or a bad port, path or container list, naming the
            annotation, the value and what is valid.
    """
    raw = annotations.get(METHOD)
    if raw is None or raw.strip() == "":
        return None
    method = raw.strip()
    if method not in METHODS:
        raise BadDeclaration(METHOD, f"unknown method {method!r} (valid: {', '.join(METHODS)})")
    if method == "http":
        return MethodSpec(method, port=_port(annotations.get(PORT)), path=_path(annotations.get(PATH)))
    if method == "kubelet":
        return MethodSpec(method, containers=_containers(annotations.get(CONTAINERS), containers))
    return MethodSpec(method)
