"""What looks wrong in a policy that parses: a misspelt driver, a code in two classes, a step whose
attempt limit is shorter than its heartbeat timeout. Each is a ``(field path, reason)`` warning;
the policy stays usable, and ``podmedic policy validate`` prints them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from podmedic.domain.policy import DriverPolicy
from podmedic.domain.policy_layers import DEFAULT_KEY, EMBEDDED, origin

KNOWN_DRIVERS = (
    "gpu.nvidia.com",  # NVIDIA's DRA driver (k8s-dra-driver-gpu): GPUs and MIG devices
    "compute-domain.nvidia.com",  # the same driver's ComputeDomains (multi-node NVLink)
    "gpu.intel.com",  # Intel's resource drivers for GPUs
    "gpu.amd.com",  # AMD's GPU DRA driver
    "gpu.example.com",  # kubernetes-sigs/dra-example-driver
)
"""DRA driver names a policy key is checked against (with the embedded policy's own keys)."""

CODE_CLASSES = ("permanent", "container_code", "ignore")


def misspelt_drivers(names: Iterable[str], known: Iterable[str]) -> list[tuple[str, str]]:
    """A driver key that names no known driver but is close to one, with the suggestion."""
    known = sorted(set(known) | set(KNOWN_DRIVERS))
    warnings = []
    for name in names:
        if name == DEFAULT_KEY or name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:
            warnings.append((f"drivers.{name}", f"not a known driver: did you mean {close[0]}? (an entry applies "
                                                f"only to devices of a driver named exactly so)"))
    return warnings


def codes_in_two_classes(name: str, policy: DriverPolicy) -> list[tuple[str, str]]:
    """Codes listed in more than one class of the XID table."""
    codes = policy.classification.codes
    where: dict[int, list[str]] = {}
    for cls in CODE_CLASSES:
        for code in getattr(codes, cls):
            where.setdefault(code, []).append(cls)
    return [(f"drivers.{name}.classification.codes", f"code {code} is listed in {' and '.join(classes)}")
            for code, classes in sorted(where.items()) if len(classes) > 1]


def timeouts_under_heartbeat(name: str, policy: DriverPolicy) -> list[tuple[str, str]]:
    """Steps whose attempt ends before its heartbeat timeout could ever fire."""
    warnings = []
    for step, options in policy.steps:
        if options.heartbeat_s is not None and options.start_to_close_s < options.heartbeat_s:
            warnings.append((f"drivers.{name}.steps.{step}", f"start_to_close_s {options.start_to_close_s:g} is "
                                                             f"shorter than heartbeat_s {options.heartbeat_s:g}: a "
                                                             "hung attempt is never noticed by its heartbeat"))
    return warnings


def _leaf_paths(raw: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    if isinstance(raw, Mapping) and raw:
        return [leaf for key, sub in raw.items() for leaf in _leaf_paths(sub, (*path, str(key)))]
    return [path]


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, Mapping) else None
    return data


def shadowed_defaults(drivers: Mapping[str, DriverPolicy], user: Mapping[str, Any],
                      embedded: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Values the file sets in ``drivers.default`` that a driver keeps another value of, from the embedded
    policy's entry for it (the more specific entry wins, so the file's default does not reach it)."""
    warnings = []
    mine = ((user.get("drivers") or {}).get(DEFAULT_KEY)) or {}
    for path in _leaf_paths(mine, ()):
        if not path:
            continue
        keeps = [name for name, policy in sorted(drivers.items()) if name != DEFAULT_KEY
                 and origin(("drivers", name, *path), "file", user, embedded) == f"{EMBEDDED} (drivers.{name})"
                 and _at(policy.model_dump(mode="json"), path) != _at(mine, path)]
        if keeps:
            dotted = ".".join(path)
            warnings.append((f"drivers.{DEFAULT_KEY}.{dotted}", f"{', '.join(keeps)} keep(s) the embedded policy's "
                                                                f"own value: set drivers.<driver>.{dotted} to change "
                                                                "it there too"))
    return warnings


def policy_warnings(drivers: Mapping[str, DriverPolicy], user: Mapping[str, Any],
                    embedded: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every warning of a policy in force: ``user`` is the file's own raw mapping (its driver keys are the
    ones checked for spelling), ``embedded`` the embedded policy's."""
    user_drivers = user.get("drivers") or {}
    warnings = misspelt_drivers([str(k) for k in user_drivers], embedded.get("drivers") or {})
    warnings += shadowed_defaults(drivers, user, embedded)
    for name, policy in drivers.items():
        warnings += codes_in_two_classes(name, policy) + timeouts_under_heartbeat(name, policy)
    return warnings
