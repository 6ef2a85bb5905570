"""The Temporal worker: the incident workflow and every activity, against one cluster."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from activities.checkpoints.checkpoint import CheckpointActivities
from activities.claim_cache import ReservedClaims
from activities.discover import DiscoverActivities
from activities.fleet_guard import GuardActivities
from activities.heartbeat import kept_alive
from activities.history import HistoryActivities
from activities.maintenance import MaintenanceActivities
from activities.node import NodeActivities
from activities.notice import NoticeActivities
from activities.pool_fence import PoolFenceActivities
from activities.quarantine import QuarantineActivities
from activities.recovery.recover import RecoverActivities
from activities.rule_sweep import RuleSweepActivities
from activities.running_incidents import run_closed
from activities.spares import SpareActivities
from activities.stall import StallActivities
from activities.storm_turns import TurnActivities
from activities.taint import TaintActivities
from activities.tickets import TicketActivities
from podmedic.domain.steps import DeviceInput
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.load_report import kube_load_reports
from podmedic.kube.loop_calls import LoopCalls
from podmedic.kube.startup import learning_pools, say_taint_rules
from podmedic.telemetry.probes import Readiness, api_server_check, temporal_check
from workers.worker.collector import sweep_cycles
from workers.worker.health import serving_health
from workers.worker.options import DEFAULT_CAPACITY, Capacity, worker_options
from workers.worker.versioning import deployment_config_from_env
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.fleet.guard import FleetGuardWorkflow
from workflows.fleet.incident import FleetIncidentWorkflow
from workflows.fleet.pool_fence import PoolFenceWorkflow
from workflows.fleet.storm_turn_keeper import StormTurnsWorkflow
from workflows.node.incident import NodeIncidentWorkflow
from workflows.node.maintenance import NodeMaintenanceWorkflow
from workflows.pod_reports.config_incident import ConfigIncidentWorkflow
from workflows.pod_reports.unresolved_device import UnresolvedDeviceWorkflow
from workflows.workload_stall import WorkloadStallWorkflow

log = logging.getLogger("podmedic.worker")

WORKFLOWS = [DeviceIncidentWorkflow, ConfigIncidentWorkflow, NodeIncidentWorkflow, FleetGuardWorkflow,
             FleetIncidentWorkflow, UnresolvedDeviceWorkflow, PoolFenceWorkflow, StormTurnsWorkflow,
             WorkloadStallWorkflow, NodeMaintenanceWorkflow]


def all_activities(kube: KubeGateway, client: Client) -> Sequence[Any]:
    """Every activity podmedic registers, bound to one cluster gateway and one Temporal client."""
    kube = kube.for_component("worker")  # requests say who made them (RBAC proof: tests/deploy)
    # One cache: discovery's reads serve the health reads and recovery.
    claims = ReservedClaims(LoopCalls(kube, around=kept_alive).get_claim)
    discover, checkpoint = DiscoverActivities(kube, claims), CheckpointActivities(kube)
    taint, recover = TaintActivities(kube, run_closed(client)), RecoverActivities(kube, claims)
    ticket = TicketActivities(kube, client)
    notice = NoticeActivities(kube)
    stall = StallActivities(kube)
    maintenance = MaintenanceActivities(kube, claims)
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
        ticket.note_ticket,
        stall.watch_steps,
        stall.end_stalled_rank,
        maintenance.plan_maintenance,
        maintenance.node_back,
        notice.notify_pod,
        notice.notify_step,
        NodeActivities(client).report_to_node,
        *node_activities(kube, client),
        *guard_activities(kube, client),
        RuleSweepActivities(kube, client, lambda device: discover.read_device_health(DeviceInput(device=device)))
        .sweep_taint_rules,
        *pool_fence_activities(kube),
        *turn_activities(client),
    ]


def turn_activities(client: Client) -> list[Any]:
    """A storm's turns (workflows/fleet/storm_turn_keeper.py)."""
    turns = TurnActivities(client)
    return [turns.ask_turn, turns.give_back_turn, turns.admit_turns]


def pool_fence_activities(kube: KubeGateway) -> list[Any]:
    """A storm's pool fences (workers/ingest/storm_fence.py)."""
    fence = PoolFenceActivities(kube)
    return [fence.fence_pool, fence.unfence_pool, fence.devices_without_own_rule]


def guard_activities(kube: KubeGateway, client: Client) -> list[Any]:
    """The fleet guard's: ask, release, closed holders, fleet sizes, warm spares."""
    guard = GuardActivities(client, kube)
    return [guard.ask_guard, guard.release_guard, guard.closed_holders, guard.fleet_size,
            SpareActivities(kube).keep_spares]


def node_activities(kube: KubeGateway, client: Client) -> list[Any]:
    """Node quarantine, shared taint rules and incident history."""
    node, quarantine = NodeActivities(client), QuarantineActivities(kube)
    taint = TaintActivities(kube, run_closed(client))
    return [node.request_node_quarantine, node.device_incidents_status, taint.hold_taints, taint.release_taints,
            quarantine.quarantine_node, quarantine.lift_quarantine, quarantine.node_plugin_capacity,
            *_history(client, kube)]


def _history(client: Client, kube: KubeGateway) -> list[Any]:
    history = HistoryActivities(client, kube)
    return [history.previous_incidents, history.device_history]


SHUTDOWN_GRACE_S = 50.0
"""How long running activities may finish after SIGTERM: the manifests' terminationGracePeriodSeconds
(60) less room for the rest of the shutdown."""


def build_worker(client: Client, task_queue: str, kube: KubeGateway, *, sandboxed: bool = False,
                 shutdown_grace_s: float = SHUTDOWN_GRACE_S, pod_cache: bool = True,
                 capacity: Capacity = DEFAULT_CAPACITY) -> Worker:
    """A worker for the incident workflow and its activities.

    On shutdown it stops polling at once and gives running activities ``shutdown_grace_s`` to
    finish; those still running are then cancelled, and Temporal retries them on another worker
    (a heartbeating one resumes from its last heartbeat's details). ``pod_cache``: the activities'
    reads of pods, ResourceClaims and DeviceTaintRules come from one watch of each kind
    (``podmedic/kube/pod_cache.py``, ``object_cache.py``), which end when ``kube`` is closed.
    """
    if pod_cache:
        kube.start_caches("worker")
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=all_activities(kube, client),
        deployment_config=deployment_config_from_env(),  # PODMEDIC_DEPLOYMENT_NAME/BUILD_ID (docs/deploy.md)
        graceful_shutdown_timeout=timedelta(seconds=shutdown_grace_s),
        **worker_options(sandboxed=sandboxed, capacity=capacity),
    )


async def run_worker(client: Client, task_queue: str, kubeconfig: Path | None,
                     health: tuple[str, int] | None = None, *, sandboxed: bool = False,
                     shutdown_grace_s: float = SHUTDOWN_GRACE_S, pod_cache: bool = True,
                     capacity: Capacity = DEFAULT_CAPACITY) -> None:
    """Run until SIGINT/SIGTERM, then drain (running activities get ``shutdown_grace_s``) and stop;
    probes on ``health`` (host, port) if given; pod, claim and taint rule reads from watches when ``pod_cache``."""
    kube = KubeGateway(kubeconfig)
    await say_taint_rules(kube)
    worker = build_worker(client, task_queue, kube, sandboxed=sandboxed, shutdown_grace_s=shutdown_grace_s,
                          pod_cache=pod_cache, capacity=capacity)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
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

    async with sweep_cycles(), kube_load_reports(kube.limiter), learning_pools(kube.for_component("worker")), \
            readiness.running(), serving_health(health, ready), worker:
        polling = True
        await stop.wait()
        log.info("stopping: no new tasks; running activities get up to %gs to finish", shutdown_grace_s)
    kube.close()
    log.info("worker stopped")
