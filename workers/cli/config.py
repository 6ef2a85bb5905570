"""``podmedic config show``: every variable a podmedic process reads, its value and where it came from."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from podmedic.domain.policy_file import PolicyError, load_policy
from podmedic.domain.ticket_policy import ticket_variables
from podmedic.settings import PROCESSES, SettingsError
from podmedic.settings.describe import settings_rows
from workers.cli.output import add_output_flag, render

HELP = """\
Print the settings a podmedic process would start with here: each environment variable it reads,
the value in force (secrets as `(set)`), and whether it came from the variable or the default.
A bad value is an error naming the variable, as the process itself would refuse to start.

Processes: """ + ", ".join(PROCESSES) + """ (cli: the operator commands).

Examples:
  podmedic config show worker
  PODMEDIC_METRICS_PORT=9464 podmedic config show ingest -o yaml
  kubectl exec deploy/podmedic-worker -- podmedic config show worker -o json
"""


def cmd_show(args: argparse.Namespace) -> int:
    """Print one process's settings."""
    try:
        settings = PROCESSES[args.process].load()
    except SettingsError as exc:
        print(f"podmedic config show {args.process}: {exc}", file=sys.stderr)
        return 2
    rows = settings_rows(settings)
    if args.process == "worker":
        try:
            rows += _policy_rows(getattr(settings, "policy", None))
        except PolicyError as exc:
            print(f"podmedic config show {args.process}: {exc}", file=sys.stderr)
            return 2
    output = args.output or "table"
    if output in ("json", "yaml"):
        print(render([{k: r[k] for k in ("setting", "variables", "value", "source", "default")} for r in rows],
                     output), end="")
        return 0
    wide = output == "wide"
    group = ""
    for row in rows:
        if row["group"] != group:
            group = row["group"]
            print(f"{'' if group == rows[0]['group'] else chr(10)}# {group}")
        shown = row["shown"] or '""'
        line = f"{row['variables'][0]:<36} {shown:<28} {_origin(row)}"
        print(f"{line}  {row['description']}" if wide else line)
    return 0


def _policy_rows(policy: Path | None) -> list[dict[str, Any]]:
    """The variables the policy's ticket backends name (their values stay hidden: URLs carry credentials)."""
    named: dict[str, set[str]] = {}
    for driver in load_policy(policy).drivers.values():
        for variable, what in ticket_variables(driver.ticket).items():
            named.setdefault(variable, set()).add(what)
    group = f"Named by the policy ({policy or 'embedded'}): read by the worker when it files a ticket"
    return [{"group": group, "setting": variable, "variables": [variable],
             "value": "(set)" if os.environ.get(variable) else None,
             "shown": "(set)" if os.environ.get(variable) else "(unset)",
             "source": variable if os.environ.get(variable) else "default", "default": "unset",
             "description": "; ".join(sorted(what))} for variable, what in sorted(named.items())]


def _origin(row: dict[str, Any]) -> str:
    return "(default)" if row["source"] == "default" else f"(from {row['source']})"


def register(sub: Any) -> None:
    """Add ``config`` to the ``podmedic`` command tree."""
    p = sub.add_parser("config", help="show the settings (environment variables) of a podmedic process",
                       description="The settings of podmedic's processes.")
    actions = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    q = actions.add_parser("show", help="each variable a process reads, its value and where it came from",
                           description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("process", nargs="?", default="worker", choices=list(PROCESSES), metavar="PROCESS",
                   help=f"one of {', '.join(PROCESSES)} (default %(default)s)")
    add_output_flag(q, ("table", "wide", "json", "yaml"), "table")
    q.set_defaults(func=cmd_show, settings_model=None)
