"""Flags and start-up checks that several ``podmedic`` commands share."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from podmedic.domain.policy_checks import policy_warnings
from podmedic.domain.policy_file import PolicyError, PolicySet, load_policy_layers
from podmedic.settings.groups import DEFAULT_TASK_QUEUE, DEFAULT_TEMPORAL_ADDRESS, TemporalTarget, parse_host_port


def host_port(text: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` for argparse, as the settings parse the variables."""
    try:
        parsed = parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    assert parsed is not None
    return parsed


def connection_flags(p: argparse.ArgumentParser) -> None:
    """Where Temporal and the cluster are, and the policy: flags with environment defaults."""
    temporal_flags(p)
    p.add_argument("--task-queue",
                   help=f"task queue of incident workflows (env PODMEDIC_TASK_QUEUE; default {DEFAULT_TASK_QUEUE})")
    p.add_argument("--kubeconfig", type=Path,
                   help="kubeconfig of the cluster to heal (env PODMEDIC_KUBECONFIG; default: in-cluster, "
                        "then ~/.kube/config)")
    policy_flag(p)


def policy_flag(p: argparse.ArgumentParser, what: str = "per-driver policy YAML") -> None:
    """``--policy FILE``, laid over the embedded policy (env ``PODMEDIC_POLICY``)."""
    p.add_argument("--policy", type=Path, help=f"{what} (env PODMEDIC_POLICY; default: the embedded policy)")


def temporal_flags(p: argparse.ArgumentParser, wait_s: float = 60.0) -> None:
    """Where Temporal is and how long to wait for it: podmedic's variables, else the temporal CLI's."""
    p.add_argument("--temporal-address",
                   help="Temporal frontend host:port (env PODMEDIC_TEMPORAL_ADDRESS, else the temporal CLI's "
                        f"TEMPORAL_ADDRESS; default {DEFAULT_TEMPORAL_ADDRESS})")
    p.add_argument("--temporal-namespace", dest="temporal_namespace",
                   help="Temporal namespace (env PODMEDIC_NAMESPACE, else TEMPORAL_NAMESPACE; default default)")
    p.add_argument("--temporal-wait", type=float, metavar="SECONDS",
                   help="keep trying to reach Temporal this long at start, backing off from 1 s to 15 s "
                        f"(env PODMEDIC_TEMPORAL_WAIT_S; default {wait_s:g})")
    if wait_s != TemporalTarget.model_fields["temporal_wait"].default:
        p.set_defaults(command_defaults={"temporal_wait": wait_s})


def load_policy_or_exit(path: Path | None) -> PolicySet:
    """The policy in force (the file laid over the embedded policy), or exit 2 naming what is wrong in the
    file; what parses but looks wrong is said on standard error, one line each."""
    try:
        layers = load_policy_layers(path)
    except PolicyError as exc:
        print(f"podmedic: refusing to start: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    for where, reason in policy_warnings(layers.policies.drivers, layers.user, layers.embedded):
        print(f"podmedic: policy {path}: warning: {where}: {reason}", file=sys.stderr)
    return layers.policies
