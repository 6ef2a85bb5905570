"""Where the operator commands find Temporal: flags, a stack's ``endpoints.json``, or env."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from podmedic.settings import CliSettings
from podmedic.settings.groups import DEFAULT_TEMPORAL_ADDRESS
from podmedic.temporal.connect import connect


class TargetError(Exception):
    """The flags do not say where Temporal is (e.g. a stack directory without endpoints.json)."""


@dataclass(frozen=True)
class Target:
    """A Temporal frontend and namespace, and the UI that shows them (for links)."""

    address: str
    namespace: str
    ui_url: str


def add_flags(p: argparse.ArgumentParser) -> None:
    """The connection flags every operator command takes."""
    p.add_argument("--temporal-address", help="Temporal frontend host:port (default: the --stack's, else env "
                                              "PODMEDIC_TEMPORAL_ADDRESS, else the temporal CLI's TEMPORAL_ADDRESS, "
                                              f"else {DEFAULT_TEMPORAL_ADDRESS})")
    p.add_argument("--temporal-namespace", dest="namespace",
                   help="Temporal namespace (default: the --stack's, else env PODMEDIC_NAMESPACE, "
                                       "else TEMPORAL_NAMESPACE, else default)")
    p.add_argument("--stack", type=Path, metavar="DIR",
                   help="a `podmedic up`/`demo` state dir: Temporal address, namespace and UI from its endpoints.json")
    p.add_argument("--ui-url", help="Temporal UI base URL, for links (env PODMEDIC_UI_URL; default: the --stack's)")
    p.set_defaults(settings_fill=False)  # the --stack sits between a flag and its variable: see target()


def target(args: argparse.Namespace) -> Target:
    """Resolve the flags: an explicit flag wins, then the stack's endpoints, then env, then defaults."""
    stack: dict[str, object] = {}
    if args.stack is not None:
        path = args.stack / "endpoints.json"
        try:
            stack = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TargetError(f"--stack {args.stack}: cannot read {path}: {exc}") from exc

    settings: CliSettings = getattr(args, "env_settings", None) or CliSettings.load()

    def pick(flag: str | None, key: str, field: str) -> str:
        from_env = str(getattr(settings, field)) if settings.is_set(field) else ""
        return flag or str(stack.get(key) or "") or from_env or str(getattr(settings, field))

    return Target(address=pick(args.temporal_address, "temporal_address", "temporal_address"),
                  namespace=pick(args.namespace, "temporal_namespace", "temporal_namespace"),
                  ui_url=pick(args.ui_url, "ui_url", "ui_url"))


async def client_for(t: Target) -> Client:
    """A client with podmedic's data converter."""
    return await connect(t.address, t.namespace)
