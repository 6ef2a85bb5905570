"""The Temporal worker: the incident workflow and every activity, against one cluster."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.checkpoints.checkpoint import CheckpointActivities
from activities.claim_cache import ReservedClaims
from activities.discover import DiscoverActivities
from activities.fleet_guard import GuardActivities
from activities.history import HistoryActivities
from activities.node import NodeActivities
from activities.notice import NoticeActivities
from activities.pool_fence import PoolFenceActivities
from activities.quarantine import QuarantineActivities
from activities.recovery.recover import RecoverActivities
from activities.taint import TaintActivities
from activities.tickets import TicketActivities
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.startup import say_taint_rules
from podmedic.telemetry.probes import Readiness, api_server_check, temporal_check
from workers.health import serving_health
from workers.versioning import deployment_config_from_env
from workflows.config_incident import ConfigIncidentWorkflow
from workflows.fleet_guard import FleetGuardWorkflow
from workflows.fleet_incident import FleetIncidentWorkflow
from workflows.incident import DeviceIncidentWorkflow
from workflows.node_incident import NodeIncidentWorkflow
from workflows.pool_fence import PoolFenceWorkflow
from workflows.unresolved_device import UnresolvedDeviceWorkflow

log = logging.getLogger("podmedic.worker")

WORKFLOWS = [DeviceIncidentWorkflow, ConfigIncidentWorkflow, NodeIncidentWorkflow, FleetGuardWorkflow,
             FleetIncidentWorkflow, UnresolvedDeviceWorkflow, PoolFenceWorkflow]


def all_activities(kube: KubeGateway, client: Client) -> Sequence[Any]:
    """Every activity podmedic registers, bound to one cluster gateway and one Temporal client."""
    kube = kube.for_component("worker")  # requests say who made them (RBAC proof: tests/deploy)
    claims = ReservedClaims(kube.get_claim)  # one cache: discovery's reads serve the health reads and recovery
    discover, checkpoint = DiscoverActivities(kube, claims), CheckpointActivities(kube)
    taint, recover, ticket = TaintActivities(kube), RecoverActivities(kube, claims), TicketActivities(kube, client)
    notice = NoticeActivities(kube)
    return [
        discover.discover_device,
        discover.read_device_health,
        checkpoint.request_checkpoints,
        taint.taint_device,
        taint.remove_taint,
        recover.restart_in_place,
        recover.reschedule_same_node,
        recover.reschedule_any_node,
        ticket.file_ticket,
        ticket.ticket_status,
        notice.notify_pod,
        notice.notify_step,
        NodeActivities(client).report_to_node,
        *node_activities(kube, client),
        *guard_activities(kube, client),
        *pool_fence_activities(kube),
    ]


def pool_fence_activities(kube: KubeGateway) -> list[Any]:
    """A storm's pool fences (podmedic/ingest/storm_fence.py)."""
    fence = PoolFenceActivities(kube)
    return [fence.fence_pool, fence.unfence_pool, fence.devices_without_own_rule]


def guard_activities(kube: KubeGateway, client: Client) -> list[Any]:
    """The fleet guard's: ask, release, fleet sizes (issue 7)."""
    guard = GuardActivities(client, kube)
    return [guard.ask_guard, guard.release_guard, guard.fleet_size]


def node_activities(kube: KubeGateway, client: Client) -> list[Any]:
    """Node quarantine, shared taint rules and incident history (issue 5, HD)."""
    node, taint, quarantine = NodeActivities(client), TaintActivities(kube), QuarantineActivities(kube)
    return [node.request_node_quarantine, node.device_incidents_status, taint.hold_taints, taint.release_taints,
            quarantine.quarantine_node, quarantine.lift_quarantine, quarantine.node_plugin_capacity,
            HistoryActivities(client).previous_incidents]


def workflow_runner(sandboxed: bool) -> WorkflowRunner:
    """How workflow code runs: in the SDK's sandbox, or directly in the worker's interpreter.

    Unsandboxed by default: podmedic runs only its own workflows, whose determinism CI proves
    in the sandbox (``tests/workflow`` run every workflow there, ``tests/replay`` replays recorded
    histories there). The sandbox re-imports the workflow modules for every incident and compiles
    code for every payload it converts: a fifth of the worker's CPU in ``python -m benchmarks
    orchestration`` (py-spy), for a check CI already makes.
    """
    return SandboxedWorkflowRunner() if sandboxed else UnsandboxedWorkflowRunner()


MAX_CACHED_WORKFLOWS = 1500
"""Workflows a worker keeps in memory (SDK default 1,000): room for a 1,000-device storm's incidents,
their node incidents and the guard. An incident evicted from the cache is replayed from its whole
history on its next task, trading CPU for memory; a cached incident costs about 0.2 MiB (docs/SCALING.md)."""


def worker_options(*, sandboxed: bool = False, max_concurrent: int = 200,
                   max_cached_workflows: int = MAX_CACHED_WORKFLOWS) -> dict[str, Any]:
    """The Worker options podmedic runs with; the bare baseline (``benchmarks/bare.py``) takes the same."""
    return {
        "max_concurrent_activities": max_concurrent,
        # Twenty workflow-task polls, nearly all on the task queue that holds new incidents' first
        # tasks (the fence runs in them); running incidents' next tasks come from the sticky queue
        # (SDK docs: maximum x ratio polls at most on the task queue, at least one on the sticky
        # queue). In a 1,000-device storm the SDK's 5 polls left a new incident's first task waiting
        # 15 s (p50) for a poll while the worker's event loop sat mostly idle (py-spy): taint p99
        # 32 s; with 20, 14 s. More sticky polls (20 x 0.5, 24 x 0.84) or autoscaled polls fenced
        # slower (p99 25-112 s), likely because running incidents' recoveries then take the CPU
        # the fences need. One storm run each: docs/BENCHMARKS.md.
        "workflow_task_poller_behavior": PollerBehaviorSimpleMaximum(maximum=20),
        "nonsticky_to_sticky_poll_ratio": 2.0,
        "max_cached_workflows": max_cached_workflows,
        "workflow_runner": workflow_runner(sandboxed),
    }


GC_THRESHOLDS = (20_000, 20, 20)
"""The cyclic collector's thresholds in a worker (CPython's: 700, 10, 10)."""


def tune_gc() -> None:
    """Collect cycles less often, and never scan what the process holds from its start.

    A worker allocates hundreds of short-lived objects per workflow task and activity (payloads,
    protobuf messages, API answers), nearly all freed by reference counting; CPython's default
    starts a collection every 700 allocations, and every so often a full one that walks each
    workflow instance the worker holds. perf on the worker in the orchestration benchmark (300
    incidents): 6 % of its CPU in the collector. Call once, after imports and setup
    (``gc.freeze`` moves everything alive then out of the collector's sight). The bare
    baseline's worker calls it too.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


SHUTDOWN_GRACE_S = 50.0
"""How long running activities may finish after SIGTERM: the manifests' terminationGracePeriodSeconds
(60) less room for the rest of the shutdown."""


def build_worker(client: Client, task_queue: str, kube: KubeGateway, *, sandboxed: bool = False,
                 max_concurrent: int = 200, shutdown_grace_s: float = SHUTDOWN_GRACE_S,
                 pod_cache: bool = True, max_cached_workflows: int = MAX_CACHED_WORKFLOWS) -> Worker:
    """A worker for the incident workflow and its activities.

    On shutdown it stops polling at once and gives running activities ``shutdown_grace_s`` to
    finish; those still running are then cancelled, and Temporal retries them on another worker
    (a heartbeating one resumes from its last heartbeat's details). ``pod_cache``: the activities'
    pod reads come from one watch of every pod (``podmedic/kube/pod_cache.py``), which ends
    when ``kube`` is closed. ``max_cached_workflows``: ``MAX_CACHED_WORKFLOWS``.
    """
    if pod_cache:
        kube.start_pod_cache("worker")
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=all_activities(kube, client),
        deployment_config=deployment_config_from_env(),  # PODMEDIC_DEPLOYMENT_NAME/BUILD_ID (docs/deploy.md)
        graceful_shutdown_timeout=timedelta(seconds=shutdown_grace_s),
        **worker_options(sandboxed=sandboxed, max_concurrent=max_concurrent,
                         max_cached_workflows=max_cached_workflows),
    )


async def run_worker(client: Client, task_queue: str, kubeconfig: Path | None,
                     health: tuple[str, int] | None = None, *, sandboxed: bool = False,
                     shutdown_grace_s: float = SHUTDOWN_GRACE_S, pod_cache: bool = True,
                     max_cached_workflows: int = MAX_CACHED_WORKFLOWS) -> None:
    """Run until SIGINT/SIGTERM, then drain (running activities get ``shutdown_grace_s``) and stop;
    probes on ``health`` (host, port) if given; pod reads from a watch of every pod when ``pod_cache``."""
    kube = KubeGateway(kubeconfig)
    await say_taint_rules(kube)
    worker = build_worker(client, task_queue, kube, sandboxed=sandboxed, shutdown_grace_s=shutdown_grace_s,
                          pod_cache=pod_cache, max_cached_workflows=max_cached_workflows)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tune_gc()
    log.info("worker polling task queue %r on %s (workflow sandbox %s)", task_queue,
             client.service_client.config.target_host, "on" if sandboxed else "off")
    polling = False
    readiness = Readiness({"temporal": temporal_check(client), "api server": api_server_check(kube.server_version)})

    def ready() -> tuple[bool, str]:
        if stop.is_set():
            return False, "not ready: draining\n"
        if not polling:
            return False, "not ready: not polling the task queue yet\n"
        return readiness.verdict()

    async with readiness.running(), serving_health(health, ready), worker:
        polling = True
        await stop.wait()
        log.info("stopping: no new tasks; running activities get up to %gs to finish", shutdown_grace_s)
    kube.close()
    log.info("worker stopped")
