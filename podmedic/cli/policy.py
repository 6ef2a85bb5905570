"""``podmedic policy validate``: check a per-driver policy file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from podmedic.domain.policy_file import PolicyError, load_policy


def cmd_policy_validate(args: argparse.Namespace) -> int:
    """Validate a policy file; print every error with its field path."""
    try:
        policies = load_policy(args.file)
    except PolicyError as exc:
        print(f"INVALID {exc.source}", file=sys.stderr)
        for path, reason in exc.errors:
            print(f"  {path}: {reason}", file=sys.stderr)
        return 1
    print(f"OK {args.file}: drivers {', '.join(sorted(policies.drivers))}")
    return 0



def register(sub: Any) -> None:
    """Add ``policy`` to the ``podmedic`` command tree."""
    p = sub.add_parser("policy", help="per-driver policy files")
    psub = p.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    v = psub.add_parser("validate", help="validate a policy file; errors name the field path")
    v.add_argument("file", type=Path, help="policy YAML")
    v.set_defaults(func=cmd_policy_validate)
