"""``podmedic worker`` and ``podmedic ingest``: the two long-running processes of a deployment."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podmedic.settings import IngestSettings, WorkerSettings
from podmedic.settings.groups import lease_timings_problem
from podmedic.telemetry.process import add_telemetry_flags
from podmedic.temporal.connect import connect_patiently
from workers.cli.exiting import exit_now
from workers.cli.flags import connection_flags, host_port, load_policy_or_exit
from workers.cli.settings_args import use_settings

if TYPE_CHECKING:
    from workers.ingest.leader import LeaseConfig

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


def _start_problem(role: str, kubeconfig: Path | None) -> str | None:
    """The cluster configuration's problem, in one line, before anything waits on the network."""
    from podmedic.kube.errors import KubeConfigError
    from podmedic.kube.gateway import KubeGateway

    try:
        KubeGateway(kubeconfig).close()
    except KubeConfigError as exc:
        return f"podmedic {role}: refusing to start: {exc}"
    return None


def _run(role: str, main: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """Run ``main``; a start problem it meets (Temporal unreachable) is one line and exit 1."""
    from podmedic.temporal.connect import TemporalUnreachable

    try:
        asyncio.run(main())
    except TemporalUnreachable as exc:
        print(f"podmedic {role}: {exc}", file=sys.stderr)
        return exit_now(1)  # after a failed connect the SDK's threads would abort the teardown
    return 0


async def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def cmd_worker(args: argparse.Namespace) -> int:
    """Run the Temporal worker."""
    from podmedic.telemetry.process import start_telemetry, telemetry_running
    from workers.worker.main import run_worker
    from workers.worker.options import Capacity

    load_policy_or_exit(args.policy)
    if (problem := _start_problem("worker", args.kubeconfig)) is not None:
        print(problem, file=sys.stderr)
        return 2
    telemetry = start_telemetry(args, "worker")

    async def main() -> None:
        client = await connect_patiently(args.temporal_address, args.temporal_namespace, args.temporal_wait)
        async with telemetry_running(telemetry, client):
            await run_worker(client, args.task_queue, args.kubeconfig, args.health_listen, sandboxed=args.sandbox,
                             shutdown_grace_s=args.shutdown_grace, pod_cache=args.pod_cache,
                             capacity=Capacity(args.max_cached_workflows, args.max_concurrent_activities))

    return _run("worker", main)


def cmd_ingest(args: argparse.Namespace) -> int:
    """Run the ingest service: cluster watches and the HTTP front."""
    from podmedic.domain.policy_file import PolicySet
    from podmedic.kube.gateway import KubeGateway
    from workers.ingest.http.auth import AuthConfigError
    from workers.ingest.service import run_ingest
    from workers.ingest.settings import SettingsError, load_ingest_settings

    policies = load_policy_or_exit(args.policy)
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
    from podmedic.telemetry.process import start_telemetry, telemetry_running

    if not args.no_watch and (problem := _start_problem("ingest", args.kubeconfig)) is not None:
        print(problem, file=sys.stderr)
        return 2
    try:
        election = _election(args, settings.state_dir)
    except ValueError as exc:
        print(f"podmedic: refusing to start: {exc}", file=sys.stderr)
        return 2
    telemetry = start_telemetry(args, "ingest")

    async def main() -> None:
        stop = await _stop_event()
        client = await connect_patiently(args.temporal_address, args.temporal_namespace, args.temporal_wait)
        kube = KubeGateway(args.kubeconfig)
        try:
            async with telemetry_running(telemetry):
                await run_ingest(client, kube, policies, settings, args.task_queue, stop,
                                 watch=not args.no_watch, http=not args.no_http, election=election)
        finally:
            kube.close()

    try:
        return _run("ingest", main)
    except AuthConfigError as exc:
        print(f"podmedic: refusing to start the HTTP front: {exc}", file=sys.stderr)
        return 2



def register(sub: Any) -> None:
    """Add ``worker`` and ``ingest`` to the ``podmedic`` command tree."""
    p = sub.add_parser("worker", help="run the Temporal worker (incident workflow + activities)")
    use_settings(p, WorkerSettings, "worker")
    connection_flags(p)
    p.add_argument("--health-listen", metavar="HOST:PORT", type=host_port,
                   help="serve /healthz and /readyz for probes here (env PODMEDIC_WORKER_HEALTH_LISTEN; default off)")
    p.add_argument("--sandbox", action="store_true", default=None,
                   help="run workflow code in the Temporal SDK's sandbox (env PODMEDIC_WORKFLOW_SANDBOX=1). "
                        "Off by default: CI proves podmedic's workflows deterministic in the sandbox, and "
                        "the sandbox costs about a fifth of the worker's CPU; turn it on when running "
                        "workflow code changed locally")
    p.add_argument("--shutdown-grace", type=float, metavar="SECONDS",
                   help="on SIGTERM, stop taking tasks and give running activities this long to finish; the "
                        "rest are cancelled and retried on another worker (env PODMEDIC_SHUTDOWN_GRACE_S; "
                        "default 50: the manifests' terminationGracePeriodSeconds 60, less 10)")
    p.add_argument("--pod-cache", action=argparse.BooleanOptionalAction, default=None,
                   help="answer pod reads from one cluster-wide watch of pods (list + watch, as a client-go "
                        "informer) instead of a GET or LIST per read, and ResourceClaim and DeviceTaintRule "
                        "reads from one watch of each; while a watch is broken its reads go to the API server "
                        "(env PODMEDIC_POD_CACHE; default on). Costs the worker memory for every pod and claim "
                        "of the cluster")
    p.add_argument("--max-cached-workflows", type=int, metavar="N",
                   help="incidents kept in memory between their tasks; one evicted is replayed from its history on "
                        "its next task, trading CPU for memory (env PODMEDIC_MAX_CACHED_WORKFLOWS; default 1500, "
                        "about 0.2 MiB each: lower it for a worker with a tight memory limit)")
    p.add_argument("--max-concurrent-activities", type=int, metavar="N",
                   help="activities running at once; most wait (a checkpoint's answer, a replacement's readiness) "
                        "and hold their slot while waiting, and API calls are limited apart from this (env "
                        "PODMEDIC_MAX_CONCURRENT_ACTIVITIES; default 1000)")
    add_telemetry_flags(p)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser(
        "ingest", help="turn health signals (cluster watches, HTTP, Alertmanager) into incidents",
        description=INGEST_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    use_settings(p, IngestSettings, "ingest")
    connection_flags(p)
    p.add_argument("--dry-run", action="store_true", default=None,
                   help="open every incident in dry run: decisions recorded, nothing in the cluster changed, "
                        "no ticket filed (env PODMEDIC_DRY_RUN=1; docs/guard.md)")
    p.add_argument("--settings", type=Path,
                   help="ingest settings YAML: http, dedup, alertmanager mapping, state_dir "
                        "(env PODMEDIC_INGEST_SETTINGS; default: built-in defaults)")
    p.add_argument("--listen", metavar="HOST:PORT", type=host_port,
                   help="HTTP front address (overrides http.host/http.port)")
    p.add_argument("--token-file", type=Path, help="bearer token file (overrides http.token_file; "
                                                   "else env PODMEDIC_INGEST_TOKEN)")
    p.add_argument("--state-dir", type=Path, help="keep watch cursors here, to resume after a restart")
    p.add_argument("--no-http", action="store_true", help="cluster watches only")
    p.add_argument("--no-watch", action="store_true", help="HTTP front only (e.g. for a cluster without access)")
    _leader_flags(p)
    add_telemetry_flags(p)
    p.set_defaults(func=cmd_ingest)


def _leader_flags(p: argparse.ArgumentParser) -> None:
    """kube-controller-manager's leader-election flags, same names and meaning."""
    g = p.add_argument_group("leader election (more than one replica; docs/deploy.md)")
    g.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None,
                   help="run the cluster watches only while holding a coordination.k8s.io Lease, so that of "
                        "several replicas one watches and the rest stand by; the HTTP front serves on all "
                        "(env PODMEDIC_LEADER_ELECT; default on)")
    g.add_argument("--leader-elect-resource-namespace", dest="leader_election_namespace", metavar="NAMESPACE",
                   help="namespace of the Lease (env PODMEDIC_LEADER_ELECTION_NAMESPACE; default 'default')")
    g.add_argument("--leader-elect-resource-name", dest="leader_election_id", metavar="NAME",
                   help="name of the Lease (env PODMEDIC_LEADER_ELECTION_ID; default podmedic-ingest)")
    g.add_argument("--leader-elect-lease-duration", dest="lease_duration_s", type=float, metavar="SECONDS",
                   help="a standby takes over this long after the leader's last renewal (default 15)")
    g.add_argument("--leader-elect-renew-deadline", dest="renew_deadline_s", type=float, metavar="SECONDS",
                   help="the leader stops watching when it could not renew for this long (default 10)")
    g.add_argument("--leader-elect-retry-period", dest="retry_period_s", type=float, metavar="SECONDS",
                   help="how often candidates try to acquire and the leader renews (default 2)")


def _election(args: argparse.Namespace, state_dir: Path | None) -> LeaseConfig | None:
    """The Lease to campaign for, from the flags and variables; ``None`` when leader election is off."""
    from workers.ingest.leader import LeaseConfig, default_identity

    if not args.leader_elect or args.no_watch:
        return None
    problem = lease_timings_problem(args.lease_duration_s, args.renew_deadline_s, args.retry_period_s)
    if problem:
        raise ValueError(problem)
    return LeaseConfig(args.leader_election_namespace, args.leader_election_id, default_identity(state_dir),
                       args.lease_duration_s, args.renew_deadline_s, args.retry_period_s)
