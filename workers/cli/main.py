"""The ``podmedic`` command line. Every subcommand's ``--help`` says what it does and how."""

from __future__ import annotations

import argparse
import logging
import sys

from podmedic import __version__
from podmedic.settings import SettingsError
from podmedic.telemetry.logs import FORMATS, configure
from podmedic.temporal.codec_server import add_codec_server_parser
from podmedic.temporal.security import SecurityError
from workers.cli import admission, agent, config, guard, incidents, policy, processes, setup, stack
from workers.cli.settings_args import apply_settings

DESCRIPTION = """\
podmedic remediates Kubernetes pods whose GPUs fail: one durable Temporal workflow per
device incident runs detect -> checkpoint -> taint -> recover -> ticket -> close.

Start here:
  podmedic demo                   whole stack on embedded defaults, with injected faults
  podmedic up --state-dir DIR     the stack without faults (Temporal, simulator, worker, ingest)
  podmedic policy validate FILE   check a per-driver policy file
  podmedic ingest --help          the detection service: cluster watches, CloudEvents, Alertmanager
  podmedic agent nvml --help      the NVIDIA node agent (XID, ECC, thermal, NVLink -> ingest)
  podmedic admission --help       the webhook that keeps a replacement pod on its node
  podmedic incidents --help       list, show, approve, skip, abort, resolve incidents
  podmedic report ID              an incident's post-mortem (Markdown or JSON)
  podmedic setup temporal         create the namespace and search attributes podmedic needs
  podmedic config show PROCESS    every environment variable a process reads, and its value
Against a real cluster: run `podmedic worker` and `podmedic ingest` with --kubeconfig
(or in-cluster credentials) and --temporal-address pointing at your Temporal.
"""


def build_parser() -> argparse.ArgumentParser:
    """The full command tree."""
    parser = argparse.ArgumentParser(prog="podmedic", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"podmedic {__version__}")
    parser.add_argument("--log-format", choices=FORMATS,
                        help="text, or json: one object per line with the incident, workflow and trace ids on "
                             "every line about an incident (env PODMEDIC_LOG_FORMAT; default text)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    processes.register(sub)
    admission.register(sub)
    policy.register(sub)
    stack.register(sub)
    agent.add_agent_parser(sub)
    add_codec_server_parser(sub)
    incidents.register(sub)
    guard.register(sub)
    setup.register(sub)
    config.register(sub)
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, each flag not given filled from the command's settings (environment).

    Raises:
        SettingsError: an environment variable the command reads has a bad value.
    """
    args = build_parser().parse_args(argv)
    apply_settings(args)
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``podmedic`` command."""
    try:
        args = parse(argv)
    except SettingsError as exc:
        command = next((a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("-")), "")
        print(f"podmedic {command}: refusing to start: {exc}".replace("  ", " "), file=sys.stderr)
        return 2
    configure(logging.DEBUG if args.verbose else logging.INFO, args.log_format or "text")
    try:
        return int(args.func(args) or 0)
    except SecurityError as exc:
        print(f"podmedic: refusing to connect to Temporal: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
