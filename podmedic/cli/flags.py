"""Flags and start-up checks that several ``podmedic`` commands share."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from podmedic.domain.policy_checks import policy_warnings
from podmedic.domain.policy_file import PolicyError, PolicySet, load_policy_layers
from podmedic.temporal.connect import DEFAULT_TASK_QUEUE


def host_port(text: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` for argparse."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 0.0.0.0:8088)")
    return host, int(port)


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def connection_flags(p: argparse.ArgumentParser) -> None:
    """Where Temporal and the cluster are, and the policy: flags with environment defaults."""
    temporal_flags(p)
    p.add_argument("--task-queue", default=_env("PODMEDIC_TASK_QUEUE", DEFAULT_TASK_QUEUE),
                   help="task queue of incident workflows (env PODMEDIC_TASK_QUEUE; default %(default)s)")
    p.add_argument("--kubeconfig", type=Path, default=os.environ.get("PODMEDIC_KUBECONFIG"),
                   help="kubeconfig of the cluster to heal (env PODMEDIC_KUBECONFIG; default: in-cluster, "
                        "then ~/.kube/config)")
    p.add_argument("--policy", type=Path, default=os.environ.get("PODMEDIC_POLICY"),
                   help="per-driver policy YAML (env PODMEDIC_POLICY; default: the embedded policy)")


def temporal_flags(p: argparse.ArgumentParser, wait_s: float = 60.0) -> None:
    """Where Temporal is and how long to wait for it: podmedic's variables, else the temporal CLI's."""
    address = _env("PODMEDIC_TEMPORAL_ADDRESS", _env("TEMPORAL_ADDRESS", "localhost:7233"))
    p.add_argument("--temporal-address", default=address,
                   help="Temporal frontend host:port (env PODMEDIC_TEMPORAL_ADDRESS, else the temporal CLI's "
                        "TEMPORAL_ADDRESS; default %(default)s)")
    p.add_argument("--temporal-namespace", dest="namespace",
                   default=_env("PODMEDIC_NAMESPACE", _env("TEMPORAL_NAMESPACE", "default")),
                   help="Temporal namespace (env PODMEDIC_NAMESPACE, else TEMPORAL_NAMESPACE; default %(default)s)")
    p.add_argument("--temporal-wait", type=float, metavar="SECONDS",
                   default=float(_env("PODMEDIC_TEMPORAL_WAIT_S", f"{wait_s:g}")),
                   help="keep trying to reach Temporal this long at start, backing off from 1 s to 15 s "
                        "(env PODMEDIC_TEMPORAL_WAIT_S; default %(default)g)")


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
