"""The ``podmedic`` command line. Every subcommand's ``--help`` says what it does and how."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from podmedic.policy_file import PolicyError, load_policy
from workers.security import SecurityError
from workers.temporal import DEFAULT_TASK_QUEUE, connect

DESCRIPTION = """\
podmedic remediates Kubernetes pods whose GPUs fail: one durable Temporal workflow per
device incident runs detect -> checkpoint -> taint -> recover -> ticket -> close.

Start here:
  podmedic demo                   whole stack on embedded defaults, with injected faults
  podmedic up --state-dir DIR     the stack without faults (Temporal, simulator, worker, ingest)
  podmedic policy validate FILE   check a per-driver policy file
  podmedic ingest --help          the detection service: cluster watches, CloudEvents, Alertmanager
  podmedic agent nvml --help      the NVIDIA node agent (XID, ECC, thermal, NVLink -> ingest)
  podmedic bench detection        events/s accepted and event -> running incident latency
  podmedic bench recovery         progress lost vs podmedic's checkpoint; image pull saved by same-node
  podmedic incidents --help       list, show, approve, skip, abort, resolve incidents
  podmedic report ID              an incident's post-mortem (Markdown or JSON)
Against a real cluster: run `podmedic worker` and `podmedic ingest` with --kubeconfig
(or in-cluster credentials) and --temporal-address pointing at your Temporal.
"""


INGEST_HELP = """\
Turn every health signal into exactly one incident per device.

Sources: pods' allocatedResourcesStatus (KEP-4680), ResourceSlice device taints written by
drivers, FailedPrepareDynamicResources Events (bad configuration is reported on the pod,
never tainted), and an HTTP front:
  POST /v1/events        CloudEvents 1.0 (application/cloudevents+json, or a batch as
                         application/cloudevents-batch+json), type io.podmedic.device.health.v1
  POST /v1/alertmanager  Alertmanager webhook (dcgm-exporter alerts; mapping in the settings)
  GET  /healthz, /v1/stats
Every POST needs `Authorization: Bearer <token>`; 202 means Temporal has the event.
Repeats of a device's state cost no Temporal round trip. See docs/detection.md.

Example:
  PODMEDIC_INGEST_TOKEN=$(cat token) podmedic ingest --kubeconfig kc --listen 0.0.0.0:8088 \\
      --state-dir /var/lib/podmedic/ingest
"""


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 0.0.0.0:8088)")
    return host, int(port)


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _connection_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temporal-address", default=_env("PODMEDIC_TEMPORAL_ADDRESS", "localhost:7233"),
                   help="Temporal frontend host:port (env PODMEDIC_TEMPORAL_ADDRESS; default %(default)s)")
    p.add_argument("--namespace", default=_env("PODMEDIC_NAMESPACE", "default"),
                   help="Temporal namespace (env PODMEDIC_NAMESPACE; default %(default)s)")
    p.add_argument("--task-queue", default=_env("PODMEDIC_TASK_QUEUE", DEFAULT_TASK_QUEUE),
                   help="task queue of incident workflows (env PODMEDIC_TASK_QUEUE; default %(default)s)")
    p.add_argument("--kubeconfig", type=Path, default=os.environ.get("PODMEDIC_KUBECONFIG"),
                   help="kubeconfig of the cluster to heal (env PODMEDIC_KUBECONFIG; default: in-cluster, "
                        "then ~/.kube/config)")
    p.add_argument("--policy", type=Path, default=os.environ.get("PODMEDIC_POLICY"),
                   help="per-driver policy YAML (env PODMEDIC_POLICY; default: the embedded policy)")


def _load_policy_or_exit(path: Path | None) -> object:
    try:
        return load_policy(path)
    except PolicyError as exc:
        print(f"podmedic: refusing to start: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc


async def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def cmd_worker(args: argparse.Namespace) -> int:
    """Run the Temporal worker."""
    from workers.telemetry_cli import start_telemetry, telemetry_running
    from workers.versioning import VersioningError, deployment_config_from_env
    from workers.worker import run_worker

    _load_policy_or_exit(args.policy)
    try:
        deployment_config_from_env()
    except VersioningError as exc:
        print(f"podmedic: refusing to start: {exc}", file=sys.stderr)
        return 2
    telemetry = start_telemetry(args, "worker")

    async def main() -> None:
        client = await connect(args.temporal_address, args.namespace)
        async with telemetry_running(telemetry, client):
            await run_worker(client, args.task_queue, args.kubeconfig, args.health_listen, sandboxed=args.sandbox)

    asyncio.run(main())
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """Run the ingest service: cluster watches and the HTTP front."""
    from activities.kube import KubeGateway
    from ingest.http.auth import AuthConfigError
    from ingest.service import run_ingest
    from ingest.settings import SettingsError, load_ingest_settings
    from podmedic.policy_file import PolicySet

    policies = _load_policy_or_exit(args.policy)
    assert isinstance(policies, PolicySet)
    if args.dry_run:  # every incident this ingest opens records its decisions and changes nothing
        policies = policies.with_dry_run()
    try:
        settings = load_ingest_settings(args.settings)
    except SettingsError as exc:
        print(f"podmedic: refusing to start: {exc}", file=sys.stderr)
        return 2
    overrides: dict[str, object] = {"token_file": args.token_file} if args.token_file else {}
    if args.listen:
        overrides["host"], overrides["port"] = args.listen
    settings = settings.model_copy(update={"http": settings.http.model_copy(update=overrides),
                                           "state_dir": args.state_dir or settings.state_dir})
    from workers.telemetry_cli import start_telemetry, telemetry_running

    telemetry = start_telemetry(args, "ingest")

    async def main() -> None:
        stop = await _stop_event()
        client = await connect(args.temporal_address, args.namespace)
        kube = KubeGateway(args.kubeconfig)
        try:
            async with telemetry_running(telemetry):
                await run_ingest(client, kube, policies, settings, args.task_queue, stop,
                                 watch=not args.no_watch, http=not args.no_http)
        finally:
            kube.close()

    try:
        asyncio.run(main())
    except AuthConfigError as exc:
        print(f"podmedic: refusing to start the HTTP front: {exc}", file=sys.stderr)
        return 2
    return 0


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


def cmd_up(args: argparse.Namespace) -> int:
    """Run the whole stack until interrupted."""
    from workers.up import Stack, StackOptions

    _load_policy_or_exit(args.policy)
    with Stack(StackOptions(state_dir=args.state_dir, policy=args.policy, nodes=args.nodes,
                            devices_per_node=args.devices_per_node)) as stack:
        stack.wait_forever()
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo."""
    from workers.demo import run_demo

    return run_demo(faults=args.faults, summary_json=args.summary_json, keep=args.keep, state_dir=args.state_dir)


def cmd_vendor_desk(args: argparse.Namespace) -> int:
    """Run the vendor ticket desk."""
    from workers.vendor_desk import serve

    serve(args.port, args.sim_url, args.resolve_after, args.store, args.shape)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The full command tree."""
    parser = argparse.ArgumentParser(prog="podmedic", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from workers.telemetry_cli import add_telemetry_flags

    p = sub.add_parser("worker", help="run the Temporal worker (incident workflow + activities)")
    _connection_flags(p)
    p.add_argument("--health-listen", metavar="HOST:PORT", type=_host_port,
                   default=os.environ.get("PODMEDIC_WORKER_HEALTH_LISTEN"),
                   help="serve /healthz and /readyz for probes here (env PODMEDIC_WORKER_HEALTH_LISTEN; default off)")
    p.add_argument("--sandbox", action="store_true",
                   default=os.environ.get("PODMEDIC_WORKFLOW_SANDBOX", "") in ("1", "true", "on"),
                   help="run workflow code in the Temporal SDK's sandbox (env PODMEDIC_WORKFLOW_SANDBOX=1). "
                        "Off by default: CI proves podmedic's workflows deterministic in the sandbox, and "
                        "the sandbox costs about a fifth of the worker's CPU; turn it on when running "
                        "workflow code changed locally")
    add_telemetry_flags(p)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser(
        "ingest", help="turn health signals (cluster watches, HTTP, Alertmanager) into incidents",
        description=INGEST_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _connection_flags(p)
    p.add_argument("--dry-run", action="store_true", default=os.environ.get("PODMEDIC_DRY_RUN") == "1",
                   help="open every incident in dry run: decisions recorded, nothing in the cluster changed, "
                        "no ticket filed (env PODMEDIC_DRY_RUN=1; docs/guard.md)")
    p.add_argument("--settings", type=Path, default=os.environ.get("PODMEDIC_INGEST_SETTINGS"),
                   help="ingest settings YAML: http, dedup, alertmanager mapping, state_dir "
                        "(env PODMEDIC_INGEST_SETTINGS; default: built-in defaults)")
    p.add_argument("--listen", metavar="HOST:PORT", type=_host_port,
                   help="HTTP front address (overrides http.host/http.port)")
    p.add_argument("--token-file", type=Path, help="bearer token file (overrides http.token_file; "
                                                   "else env PODMEDIC_INGEST_TOKEN)")
    p.add_argument("--state-dir", type=Path, help="keep watch cursors here, to resume after a restart")
    p.add_argument("--no-http", action="store_true", help="cluster watches only")
    p.add_argument("--no-watch", action="store_true", help="HTTP front only (e.g. for a cluster without access)")
    add_telemetry_flags(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("policy", help="per-driver policy files")
    psub = p.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    v = psub.add_parser("validate", help="validate a policy file; errors name the field path")
    v.add_argument("file", type=Path, help="policy YAML")
    v.set_defaults(func=cmd_policy_validate)

    for name, helptext in (("up", "start Temporal, the simulator, the worker and ingest; run until Ctrl-C"),
                           ("demo", "`up` plus injected device faults, live progress and a summary")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--state-dir", type=Path, default=Path("state") / name,
                       help="where the Temporal database, logs and endpoints.json go (default %(default)s)")
        if name == "up":
            p.add_argument("--policy", type=Path, default=os.environ.get("PODMEDIC_POLICY"),
                           help="per-driver policy YAML (default: the embedded policy)")
            p.add_argument("--nodes", type=int, default=4, help="simulated GPU nodes (default %(default)s)")
            p.add_argument("--devices-per-node", type=int, default=8, help="GPUs per node (default %(default)s)")
            p.set_defaults(func=cmd_up)
        else:
            p.add_argument("--faults", type=int, default=6, help="device faults to inject (default %(default)s)")
            p.add_argument("--summary-json", type=Path, help="write the incidents' summary here")
            p.add_argument("--keep", action="store_true", help="keep the stack running after the summary")
            p.set_defaults(func=cmd_demo)

    p = sub.add_parser("vendor-desk", help="a vendor ticket desk (generic webhook shape) for demos and tests")
    p.add_argument("--port", type=int, default=8089, help="listen port (default %(default)s)")
    p.add_argument("--sim-url", help="simulator URL: resolved tickets mark their device Healthy there")
    p.add_argument("--resolve-after", type=float, help="resolve each ticket after this many seconds")
    p.add_argument("--store", type=Path, help="JSON file that keeps tickets across restarts")
    p.add_argument("--shape", choices=["webhook", "jira", "servicenow"], default="webhook",
                   help="API shape: generic webhook, Jira REST (project OPS, bot@example.com / jira-token) or "
                        "ServiceNow Table API (podmedic / sn-password) (default %(default)s)")
    p.set_defaults(func=cmd_vendor_desk)

    from agent.cli import add_agent_parser
    from benchmarks.cli import add_bench_parser

    add_agent_parser(sub)
    add_bench_parser(sub)
    from workers.codec_server import add_codec_server_parser

    add_codec_server_parser(sub)
    from operators.cli import register as add_operator_parsers

    add_operator_parsers(sub)
    from operators.guard import register as add_guard_parser

    add_guard_parser(sub)

    try:
        from podmedic.sim import cli as sim_cli
    except ImportError:  # the simulator CLI is optional in slim images
        pass
    else:
        sim_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``podmedic`` command."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return int(args.func(args) or 0)
    except SecurityError as exc:
        print(f"podmedic: refusing to connect to Temporal: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
