"""``podmedic setup temporal``: prepare a Temporal namespace for podmedic (idempotent)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import timedelta
from typing import Any

from podmedic.temporal.connect import TemporalUnreachable, connect_patiently
from podmedic.temporal.setup import SetupError, setup_temporal
from workers.cli.exiting import exit_now
from workers.cli.flags import temporal_flags

SETUP_HELP = """\
Create the Temporal namespace podmedic runs in (unless it exists) and register podmedic's search
attributes on it (those missing); what exists is left alone, so running it again is safe.
An attribute that exists with another type is an error naming both types.

Examples:
  podmedic setup temporal --temporal-address temporal-frontend.temporal:7233 --temporal-namespace podmedic
  podmedic setup temporal --temporal-namespace my-ns.a1b2c --no-create-namespace    # Temporal Cloud
  podmedic setup temporal --dry-run                                        # say what it would do
"""


def _days(text: str) -> timedelta:
    value = text.removesuffix("d")
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days, e.g. 30d")
    return timedelta(days=int(value))


def cmd_setup_temporal(args: argparse.Namespace) -> int:
    """Run the setup; one line per thing found or done."""
    async def run() -> int:
        client = await connect_patiently(args.temporal_address, args.temporal_namespace, args.temporal_wait)
        report = await setup_temporal(client, args.temporal_namespace, retention=args.retention,
                                      create_namespace=args.create_namespace, dry_run=args.dry_run)
        for line in report.lines:
            print(line)
        return 0
    try:
        return exit_now(asyncio.run(run()))
    except (SetupError, TemporalUnreachable) as exc:
        print(f"podmedic setup temporal: {exc}", file=sys.stderr)
        return exit_now(1)


def register(sub: Any) -> None:
    """Add ``setup temporal`` to the ``podmedic`` command tree."""
    p = sub.add_parser("setup", help="prepare what podmedic needs outside the cluster (Temporal)")
    ssub = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    q = ssub.add_parser("temporal", help="create the namespace and register podmedic's search attributes",
                        description=SETUP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    temporal_flags(q, wait_s=10.0)
    q.add_argument("--retention", type=_days, default=timedelta(days=30), metavar="DAYS",
                   help="a new namespace keeps closed incidents this long, e.g. 30d (default 30d)")
    q.add_argument("--no-create-namespace", dest="create_namespace", action="store_false",
                   help="only check the namespace exists (Temporal Cloud: namespaces are made with tcld or the UI)")
    q.add_argument("--dry-run", action="store_true", help="say what would be created; change nothing")
    q.set_defaults(func=cmd_setup_temporal)
