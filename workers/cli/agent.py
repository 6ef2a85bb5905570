"""``podmedic agent nvml``: the NVML node agent's command line.

``add_agent_parser`` plugs the ``agent`` command into ``podmedic``; ``python -m workers.cli.agent
nvml ...`` runs the same without the rest of the CLI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from podmedic.settings import AgentSettings, SettingsError
from workers.agent.translate import AgentConfig
from workers.cli.flags import policy_flag
from workers.cli.settings_args import apply_settings, use_settings

log = logging.getLogger(__name__)

EXIT_USAGE = 2
EXIT_NO_NVML = 3

NVML_HELP = """\
Read GPU health through NVML (the NVIDIA driver's management library) on this node and
post it to podmedic's ingest as CloudEvents (POST <ingest-url>/v1/events, type
io.podmedic.device.health.v1). Run it on every GPU node, e.g. as a DaemonSet with
NODE_NAME from the downward API (spec.nodeName) and the ingest token from a Secret.

What it reports, per GPU (named gpu.nvidia.com/<node>/gpu-<index>, as the NVIDIA DRA
driver names devices):
  XID critical errors          at once, Unhealthy with the XID as code
  uncorrectable ECC errors     when the volatile count rises: Unhealthy, ecc-uncorrectable
  GPU lost, row remap failure, an NVLink link going down: Unhealthy
  readings as metrics          temperature_c, throttle_s (continuous HW/thermal slowdown),
                               ecc_correctable_per_hour, retired_pages, nvlink_errors_per_hour:
                               a degradation event when one passes its threshold (the
                               policy's detection.degradation), at most once per
                               --report-interval per GPU
  Healthy                      only when every problem it reported has gone away
Events the ingest cannot take yet are spooled and retried with backoff (5xx, network).

Simulator backend: with --sim-url the agent reads the GPUs of `podmedic sim` nodes
(GET <sim>/sim/v1/nodes/<node>/nvml: their XID events and readings, as NVML would
show them) instead of this machine's; --node all reads every simulated GPU node.
`podmedic up` and `podmedic demo` run it this way, so a GPU that fails while no pod
holds it is quarantined before the scheduler can hand it out.

Examples:
  podmedic agent nvml --once                   # print what it sees now, post nothing
  podmedic agent nvml --sim-url http://127.0.0.1:8001 --node all --once
  NODE_NAME=gpu-node-7 PODMEDIC_INGEST_TOKEN=... \\
  podmedic agent nvml --ingest-url http://podmedic-ingest:8080

Exit status: 0 stopped by SIGINT/SIGTERM or --once done; 2 bad arguments or policy;
3 NVML not usable here (no driver, no GPU, no permission) or, with --sim-url, the simulator
  cannot be read -- the message says which.
"""


def build_agent_commands(parser: argparse.ArgumentParser) -> None:
    """Add the agent kinds (``nvml``) under ``parser``."""
    sub = parser.add_subparsers(dest="agent_command", required=True, metavar="AGENT")
    p = sub.add_parser("nvml", help="read GPU health through NVML and post it to ingest",
                       description=NVML_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    use_settings(p, AgentSettings, "agent")
    p.add_argument("--ingest-url",
                   help="base URL of `podmedic ingest` (env PODMEDIC_INGEST_URL); required unless --once")
    p.add_argument("--token-file", type=Path,
                   help="file with the bearer token, re-read before each post (env PODMEDIC_INGEST_TOKEN_FILE); "
                        "default: the token in env PODMEDIC_INGEST_TOKEN")
    p.add_argument("--node",
                   help="this node's Kubernetes name, also the DRA pool (env NODE_NAME; default: the hostname); "
                        "with --sim-url a comma-separated list, or `all`")
    p.add_argument("--sim-url",
                   help="read simulated GPUs from `podmedic sim` at this URL instead of NVML (env PODMEDIC_SIM_URL)")
    p.add_argument("--interval", type=float, default=10.0,
                   help="seconds between readings; XIDs are reported as they happen (default %(default)s)")
    p.add_argument("--report-interval", type=float, default=300.0,
                   help="at most one degradation report per GPU per this many seconds (default %(default)s)")
    p.add_argument("--device-template", default="gpu-{index}",
                   help="DRA device name; fields {index}, {uuid}, {node} (default %(default)s)")
    p.add_argument("--driver", default="gpu.nvidia.com", help="DRA driver name (default %(default)s)")
    policy_flag(p, "policy YAML whose detection.degradation gives the report thresholds")
    p.add_argument("--spool", type=int, default=10_000,
                   help="events kept while the ingest is unreachable; the oldest go first (default %(default)s)")
    p.add_argument("--once", action="store_true",
                   help="read once, print the CloudEvents (a JSON array) to stdout and exit; posts nothing")
    p.set_defaults(func=cmd_nvml)


def add_agent_parser(subparsers: Any) -> None:
    """Add ``agent`` to the ``podmedic`` command tree (``subparsers`` from ``add_subparsers``)."""
    p = subparsers.add_parser("agent", help="node agents: read device health where it happens, post it to ingest",
                              description="Node agents that read device health on a node and post it to "
                                          "`podmedic ingest`. Today: `nvml` for NVIDIA GPUs.")
    build_agent_commands(p)


def _fail(code: int, message: str) -> int:
    print(f"podmedic agent nvml: {message}", file=sys.stderr)
    return code


def _config(args: argparse.Namespace, node: str) -> AgentConfig:
    from podmedic.domain.policy_file import load_policy

    thresholds = load_policy(args.policy).for_driver(args.driver).detection.degradation
    return AgentConfig(node=node, driver=args.driver, device_template=args.device_template,
                       thresholds=dict(thresholds), report_interval_s=args.report_interval)


def cmd_nvml(args: argparse.Namespace) -> int:
    """Run the NVML agent (or one reading with ``--once``)."""
    from podmedic.domain.policy_file import PolicyError
    from workers.agent.loop import once
    from workers.agent.translate import Translator

    if not args.once and not args.ingest_url:
        return _fail(EXIT_USAGE, "--ingest-url (or env PODMEDIC_INGEST_URL) is required unless --once")
    if args.interval <= 0:
        return _fail(EXIT_USAGE, "--interval must be positive")
    node = args.node or socket.gethostname()
    if not args.node and not args.once:
        log.warning("NODE_NAME is not set: using the hostname %r as the node name; in Kubernetes set NODE_NAME "
                    "from spec.nodeName", node)
    if node == "all" and not args.sim_url:
        return _fail(EXIT_USAGE, "--node all needs --sim-url (one agent per real node)")
    try:
        _config(args, node)  # a bad policy or device template is refused before any device is opened
    except (PolicyError, ValueError) as exc:
        return _fail(EXIT_USAGE, str(exc))
    try:
        readers = _readers(args, node)
    except RuntimeError as exc:
        return _fail(EXIT_NO_NVML, str(exc))
    try:
        nodes = [(reader, Translator(_config(args, name), reader.devices)) for name, reader in readers]
        if args.once:
            print(json.dumps([e for reader, t in nodes for e in once(reader, t)], indent=2))
            return 0
        asyncio.run(_run(args, nodes))
    finally:
        _close(readers)
    return 0


def _readers(args: argparse.Namespace, node: str) -> list[tuple[str, Any]]:
    """(node, reader) pairs: this machine's NVML, or the simulator's nodes; ``RuntimeError`` says why not."""
    from workers.agent.nvml_reader import NvmlReader, NvmlUnavailable
    from workers.agent.sim_reader import SimNvmlReader, SimUnavailable, sim_nodes

    if not args.sim_url:
        try:
            return [(node, NvmlReader())]
        except NvmlUnavailable as exc:
            raise RuntimeError(str(exc)) from None
    try:
        names = sim_nodes(args.sim_url) if node == "all" else [n for n in node.split(",") if n]
        return [(name, SimNvmlReader(args.sim_url, name)) for name in names]
    except SimUnavailable as exc:
        raise RuntimeError(str(exc)) from None


def _close(readers: list[tuple[str, Any]]) -> None:
    for _, reader in readers:
        reader.close()


async def _run(args: argparse.Namespace, nodes: list[tuple[Any, Any]]) -> None:
    from workers.agent.loop import run_agents
    from workers.agent.post import Poster

    secret = args.env_settings.ingest_token
    token = secret.get_secret_value() if secret is not None else None
    if args.token_file is None and not token:
        log.warning("no ingest token (--token-file or env PODMEDIC_INGEST_TOKEN): posting without one")
    poster = Poster(args.ingest_url, token=token, token_file=args.token_file, spool_max=args.spool)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    for reader, translator in nodes:
        log.info("NVML agent on %s%s: %d GPUs (%s), posting to %s every %.0f s", translator.config.node,
                 f" (simulated, {args.sim_url})" if args.sim_url else "", len(reader.devices),
                 ", ".join(f"{d.index}:{d.name}" for d in reader.devices), poster.url, args.interval)
    await run_agents(nodes, poster, interval_s=args.interval, stop=stop)


def main(argv: list[str] | None = None) -> int:
    """``python -m workers.cli.agent nvml ...``."""
    parser = argparse.ArgumentParser(prog="podmedic agent", description="podmedic node agents")
    build_agent_commands(parser)
    args = parser.parse_args(argv)
    try:
        apply_settings(args)
    except SettingsError as exc:
        return _fail(EXIT_USAGE, str(exc))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
