"""Loading and validating the policy file, with errors that name the field and the reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from podmedic.domain.config_file import ConfigFileError, parse_yaml, read_text
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.policy import DriverPolicy
from podmedic.domain.policy_layers import DEFAULT_KEY, EMBEDDED, embedded_text, empty_sections, layered, overlay

TOP_KEYS = ("drivers", "guard")


class PolicyError(ConfigFileError):
    """A policy file that cannot be used; ``errors`` lists ``(field path, reason)``."""

    kind = "policy"


class PolicySet(BaseModel):
    """Every driver's resolved policy; ``for_driver`` falls back to ``default``."""

    model_config = ConfigDict(frozen=True)

    drivers: dict[str, DriverPolicy]
    guard: GuardPolicy | None = None

    def with_dry_run(self) -> PolicySet:
        """Every driver in dry run (``podmedic ingest --dry-run``): decisions recorded, nothing changed."""
        return self.model_copy(update={"drivers": {name: policy.model_copy(update={"dry_run": True})
                                                   for name, policy in self.drivers.items()}})

    def for_driver(self, driver: str) -> DriverPolicy:
        """The policy for ``driver``: its own entry, else ``default`` renamed for it."""
        if driver in self.drivers:
            return self.drivers[driver]
        return self.drivers[DEFAULT_KEY].model_copy(update={"driver": driver})


def _set_in(entry: Mapping[str, Any], loc: tuple[int | str, ...]) -> bool:
    """Whether ``entry`` itself sets the value at ``loc`` (else the error is default's)."""
    node: Any = entry
    for part in loc:
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if (isinstance(node, Mapping) and part in node) or in_list:
            node = node[part]
        else:
            return False
    return True


def _path(driver: str, loc: tuple[int | str, ...]) -> str:
    return f"drivers.{driver}" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc
    )


def read_raw(text: str, source: str) -> Mapping[str, Any]:
    """A policy file's YAML as a mapping with only known top-level keys, else ``PolicyError``."""
    raw = parse_yaml(text, source, PolicyError)
    if not isinstance(raw, Mapping):
        raise PolicyError(source, [("(top)", "must be a mapping with a 'drivers' key")])
    unknown = sorted((key for key in raw if key not in TOP_KEYS), key=repr)
    errors = [(key if isinstance(key, str) and key.isidentifier() else f"(top) key {key!r}",
               "unknown top-level key (only 'drivers' and 'guard' are allowed)") for key in unknown]
    if errors:
        raise PolicyError(source, errors)
    return raw


def parse_policy(text: str, source: str = "<policy>") -> PolicySet:
    """Parse and validate a whole policy's YAML, on its own; raises ``PolicyError`` listing every problem."""
    return policy_from_raw(read_raw(text, source), source)


def policy_from_raw(raw: Mapping[str, Any], source: str) -> PolicySet:
    """Validate a whole raw policy; raises ``PolicyError`` listing every problem."""
    errors: list[tuple[str, str]] = []
    guard = _guard(raw.get("guard"), errors)
    drivers = raw.get("drivers")
    if not isinstance(drivers, Mapping) or not drivers:
        raise PolicyError(source, [*errors, ("drivers", "must be a non-empty mapping of driver name to policy")])
    if DEFAULT_KEY not in drivers:
        errors.append((f"drivers.{DEFAULT_KEY}", "missing: every policy needs a default entry"))
    base = drivers.get(DEFAULT_KEY) or {}
    resolved: dict[str, DriverPolicy] = {}
    for name, entry in drivers.items():
        if entry is None:
            entry = {}
        if not isinstance(entry, Mapping) or not isinstance(base, Mapping):
            errors.append((f"drivers.{name}", "must be a mapping"))
            continue
        if "driver" in entry:
            errors.append((f"drivers.{name}.driver", "is set from the key; remove it"))
            continue
        if "guard" in entry:
            errors.append((f"drivers.{name}.guard", "the guard is fleet-wide: set it at the top level"))
            continue
        merged = entry if name == DEFAULT_KEY else overlay(base, entry)
        try:
            policy = DriverPolicy.model_validate({**merged, "driver": str(name)})
            dry_run = policy.dry_run or (guard is not None and guard.dry_run)
            resolved[str(name)] = policy.model_copy(update={"guard": guard, "dry_run": dry_run})
        except ValidationError as exc:
            for err in exc.errors():
                if name != DEFAULT_KEY and DEFAULT_KEY in drivers and not _set_in(entry, err["loc"]):
                    continue
                errors.append((_path(str(name), tuple(err["loc"])), err["msg"]))
    if errors:
        raise PolicyError(source, errors)
    return PolicySet(drivers=resolved, guard=guard)


def _guard(raw: Any, errors: list[tuple[str, str]]) -> GuardPolicy | None:
    """The top-level ``guard:`` section; absent: no guard (an empty mapping: the defaults)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        errors.append(("guard", "must be a mapping"))
        return None
    try:
        return GuardPolicy.model_validate(raw)
    except ValidationError as exc:
        errors.extend(("guard" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]),
                       err["msg"]) for err in exc.errors())
        return None


@dataclass(frozen=True)
class PolicyLayers:
    """The policy in force and the layers it was made of (for ``podmedic policy show`` and ``validate``)."""

    policies: PolicySet
    source: str | None  # the file laid over the embedded policy, if any
    user: Mapping[str, Any]  # the file's own mapping ({} without a file)
    embedded: Mapping[str, Any]


def load_policy_layers(path: Path | None) -> PolicyLayers:
    """The embedded default policy, with the file at ``path`` laid over it (``podmedic.domain.policy_layers``);
    errors name the field in the file."""
    embedded = read_raw(embedded_text(), EMBEDDED)
    if path is None:
        return PolicyLayers(policy_from_raw(embedded, EMBEDDED), None, {}, embedded)
    source = str(path)
    user = read_raw(read_text(path, PolicyError), source)
    if empty := empty_sections(user):
        raise PolicyError(source, empty)
    return PolicyLayers(policy_from_raw(layered(embedded, user), source), source, user, embedded)


def load_policy(path: Path | None) -> PolicySet:
    """The policy in force: the embedded default policy, with the file at ``path`` laid over it."""
    return load_policy_layers(path).policies
