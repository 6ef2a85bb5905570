"""``podmedic policy validate`` and ``podmedic policy show``: check a policy file, print the policy in force."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from podmedic.domain.policy_checks import policy_warnings
from podmedic.domain.policy_file import PolicyError, PolicyLayers, load_policy_layers
from podmedic.domain.policy_layers import origin


def _load(path: Path | None) -> PolicyLayers | None:
    try:
        return load_policy_layers(path)
    except PolicyError as exc:
        print(f"INVALID {exc.source}", file=sys.stderr)
        for where, reason in exc.errors:
            print(f"  {where}: {reason}", file=sys.stderr)
        return None


def cmd_policy_validate(args: argparse.Namespace) -> int:
    """Validate a policy file laid over the embedded policy; print every error, then what looks wrong."""
    layers = _load(args.file)
    if layers is None:
        return 1
    drivers = layers.policies.drivers
    warnings = policy_warnings(drivers, layers.user, layers.embedded)
    for where, reason in warnings:
        print(f"WARNING {where}: {reason}", file=sys.stderr)
    print(f"OK {args.file}: laid over the embedded policy; drivers {', '.join(sorted(drivers))}"
          + (f"; {len(warnings)} warning(s)" if warnings else ""))
    return 0


def effective(layers: PolicyLayers) -> dict[str, Any]:
    """The policy in force as plain data: the guard and every driver's resolved entry."""
    guard = layers.policies.guard
    return {"guard": guard.model_dump(mode="json") if guard is not None else None,
            "drivers": {name: p.model_dump(mode="json", exclude={"driver", "guard"})
                        for name, p in sorted(layers.policies.drivers.items())}}


def _leaves(value: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(value, Mapping) and value:
        return [leaf for key, sub in value.items() for leaf in _leaves(sub, (*path, str(key)))]
    return [(path, value)]


def origins(layers: PolicyLayers) -> dict[str, str]:
    """Each value's dotted path in force, and where it came from."""
    found = {}
    for path, _ in _leaves(effective(layers), ()):
        if path[0] == "guard" and len(path) == 1:
            continue  # no guard at all
        found[".".join(path)] = origin(path, layers.source, layers.user, layers.embedded)
    return found


def _yaml(value: Any, path: tuple[str, ...], where: dict[str, str], depth: int) -> list[str]:
    lines = []
    for key, sub in value.items():
        here, pad = (*path, str(key)), "  " * depth
        if isinstance(sub, Mapping) and sub:
            lines += [f"{pad}{json.dumps(key) if ':' in key or ' ' in key else key}:",
                      *_yaml(sub, here, where, depth + 1)]
        else:
            note = where.get(".".join(here))
            lines.append(f"{pad}{key}: {json.dumps(sub)}" + (f"  # {note}" if note else ""))
    return lines


def cmd_policy_show(args: argparse.Namespace) -> int:
    """Print the policy in force (embedded policy, the file over it), each value with where it came from."""
    layers = _load(args.file)
    if layers is None:
        return 1
    data = effective(layers)
    if args.output == "json":
        print(json.dumps({**data, "origins": origins(layers)}, indent=2))
        return 0
    over = f" with {layers.source} laid over it" if layers.source else ""
    print(f"# The policy in force: the embedded default policy{over}. Each value says where it came from;")
    print("# built-in: the field's default, set by no policy.")
    print("\n".join(_yaml(data, (), origins(layers), 0)))
    return 0


def register(sub: Any) -> None:
    """Add ``policy`` to the ``podmedic`` command tree."""
    p = sub.add_parser("policy", help="per-driver policy files")
    psub = p.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    v = psub.add_parser(
        "validate", help="validate a policy file laid over the embedded policy; errors name the field path",
        description="A policy file lists only what it changes: it is laid over the embedded default policy, "
                    "each driver's entry over that driver's, so what it does not mention stays as shipped. "
                    "Errors (exit 1) name the field; warnings name what parses but looks wrong (a driver key "
                    "close to a known driver, a code in two classes, a step limit shorter than its heartbeat).")
    v.add_argument("file", type=Path, help="policy YAML")
    v.set_defaults(func=cmd_policy_validate)
    s = psub.add_parser("show", help="print the policy in force, each value with where it came from",
                        description="Prints the embedded default policy with FILE (if given) laid over it, "
                                    "as YAML whose comments name each value's origin: the file's entry, the "
                                    "embedded policy's entry, or built-in.")
    s.add_argument("file", type=Path, nargs="?", help="policy YAML (default: the embedded policy alone)")
    s.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml",
                   help="yaml (default: with origins as comments) or json (with an 'origins' map)")
    s.set_defaults(func=cmd_policy_show)
