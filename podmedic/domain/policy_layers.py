"""A policy file laid over the embedded default policy, and where each value in force came from.

A file lists only what it changes: its guard is laid over the embedded guard key by key, each of
its driver entries over the embedded entry of that driver (a new driver is added), mappings
merging key by key, lists and values replaced whole. So a file that sets one knob keeps the
fleet guard, the XID table and everything else it does not mention. Removing is explicit:
``guard: {enabled: false}``, an empty list (``permanent: []``).

For a value of driver ``d`` the most specific setting wins: the file's ``drivers.d``, then the
embedded ``drivers.d``, then the file's ``drivers.default``, then the embedded ``drivers.default``,
then the built-in default of the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

DEFAULT_KEY = "default"
EMBEDDED = "embedded default policy"
BUILT_IN = "built-in"


def embedded_text() -> str:
    """The embedded default policy's YAML."""
    return resources.files("podmedic.domain").joinpath("default_policy.yaml").read_text()


def overlay(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` laid over ``base``: mappings merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in top.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = overlay(old, value)
        else:
            merged[key] = value
    return merged


def empty_sections(user: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Sections a file names but leaves empty, which would otherwise silently mean "no change" or
    "remove": each is refused with what to write instead."""
    errors = []
    if "guard" in user and user["guard"] is None:
        errors.append(("guard", "is empty: to keep the embedded guard remove the key; to turn it off write "
                                "guard: {enabled: false}"))
    if "drivers" in user and user["drivers"] is None:
        errors.append(("drivers", "is empty: remove the key to keep the embedded drivers, or name a driver"))
    return errors


def layered(base: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    """``user`` laid over ``base`` (both raw policy mappings); a driver entry left empty changes nothing."""
    drivers = user.get("drivers")
    if isinstance(drivers, Mapping):
        user = {**user, "drivers": {name: ({} if entry is None else entry) for name, entry in drivers.items()}}
    return overlay(base, user)


def _sets(raw: Any, path: tuple[str, ...]) -> bool:
    node = raw
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def origin(path: tuple[str, ...], source: str | None, user: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    """Where the value at ``path`` (``("drivers", d, ...)`` or ``("guard", ...)``) in force came from: the file
    ``source`` or the embedded policy, with the entry that set it, else ``BUILT_IN``."""
    if path[0] == "guard":
        candidates = [(user, path), (base, path)]
    else:
        driver, rest = path[1], path[2:]
        entries = [driver] if driver == DEFAULT_KEY else [driver, DEFAULT_KEY]
        candidates = [(raw, ("drivers", entry, *rest)) for entry in entries for raw in (user, base)]
    for raw, where in candidates:
        if _sets(raw, where):
            entry = ".".join(where[:1] if where[0] == "guard" else where[:2])
            return f"{source if raw is user and source else EMBEDDED} ({entry})"
    return BUILT_IN
