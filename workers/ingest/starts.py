"""One Temporal start per kind of observation: the incident each kind opens or tells, and how.

A device's observation signals-with-start ``device/<driver>/<pool>/<device>``; a device plugin's
device, its node's incident ``node/<node>``; a pod's configuration problem or unresolved device, a
report opened at most once per pod; a workload that stopped stepping, ``workload/<ns>/<kind>/<name>``; a node's
announced maintenance, ``maintenance/<node>``.
The Temporal server, not the ingest, decides whether an incident is already open: restarts and replicas
never open a second. ``Deliverer`` (``workers/ingest/delivery.py``) chooses which of these an
observation takes, after its dedup.
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from podmedic.domain import describe, search
from podmedic.domain import workflow_names as names
from podmedic.domain.maintenance import MaintenanceInput, MaintenanceNotice
from podmedic.domain.models import (
    ConfigProblem,
    DeviceHealthEvent,
    Health,
    IncidentInput,
    PluginDevice,
    UnresolvedDevice,
)
from podmedic.domain.node import NodeWatchInput
from podmedic.domain.policy_file import PolicySet
from podmedic.domain.policy_ref import POLICY_MEMO, pack, ref_of
from podmedic.domain.stall import StallInput, WorkloadStall
from podmedic.temporal.signals import open_run_id, signal_if_open


async def _tell_open(client: Client, workflow_id: str, signal: str, arg: BaseModel) -> str | None:
    """Signal ``workflow_id`` if it is open; the run id told, or ``None`` when there is none (good news
    never opens an incident)."""
    if not await signal_if_open(client, workflow_id, signal, arg):
        return None
    return await open_run_id(client, workflow_id)


async def deliver_event(
    client: Client,
    event: DeviceHealthEvent,
    policies: PolicySet,
    *,
    task_queue: str,
    search_attributes: bool = True,
    storm: bool = False,
) -> str | None:
    """Deliver one event to its device's incident; returns the run id, or ``None`` when a
    Healthy event finds no open incident (nothing to do). ``storm``: the driver is in a storm
    (``workers/ingest/storm_fence.py``); an incident it opens waits its turn once fenced.

    Unhealthy and Unknown events use signal-with-start: an open incident receives the
    signal, otherwise a new run opens with the driver's policy as in force now. Healthy
    events only signal an open incident: good news never opens one.
    """
    device = event.device
    if event.health is Health.HEALTHY:
        return await _tell_open(client, device.workflow_id, names.HEALTH_EVENT, event)
    policy = policies.for_driver(device.driver)
    ref = ref_of(policy)
    handle = await client.start_workflow(
        names.DEVICE_INCIDENT,
        IncidentInput(device=device, policy_ref=ref, search_attributes=search_attributes, storm=storm),
        id=device.workflow_id,
        task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal=names.HEALTH_EVENT,
        start_signal_args=[event],
        search_attributes=search.initial(device.driver, device.resource_id, event.node)
        if search_attributes else None,
        memo={POLICY_MEMO: pack(policy)},  # the content the input names by digest (podmedic/domain/policy_ref.py)
        static_summary=describe.static_summary(event), static_details=describe.static_details(event, policy, ref),
    )
    return handle.result_run_id


async def deliver_plugin_device(client: Client, item: PluginDevice, policies: PolicySet, *, task_queue: str,
                                search_attributes: bool = True) -> str | None:
    """Deliver a device plugin's device to its node's incident; the run id, or ``None`` when a Healthy
    report finds no open node incident.

    Not Healthy: signal-with-start ``node/<node>`` (the node incident quarantines the node: no
    DeviceTaintRule can select the device), with the policy of the resource's name (``nvidia.com/gpu``),
    else the default. Healthy: only tells an open node incident.
    """
    if item.health is Health.HEALTHY:
        return await _tell_open(client, item.workflow_id, names.PLUGIN_DEVICE_HEALTHY, item)
    watch = NodeWatchInput.under(item.node, item.resource, policies.for_driver(item.resource),
                                 search_attributes=search_attributes)
    handle = await client.start_workflow(
        names.NODE_INCIDENT, watch, id=item.workflow_id, task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal=names.PLUGIN_DEVICE_FAILED, start_signal_args=[item],
        search_attributes=search.for_node(item.resource, item.node) if search_attributes else None,
        static_summary=f"node {item.node}: device-plugin device {item.name} {item.health.value}"[:200],
    )
    return handle.result_run_id


async def deliver_pod_report(client: Client, item: ConfigProblem | UnresolvedDevice, *, task_queue: str,
                             search_attributes: bool = True) -> bool:
    """Open a report on a pod (a configuration problem, or a device podmedic cannot resolve) unless
    one ever existed for it; True when opened now.

    A pod instance gets one report per problem, ever (REJECT_DUPLICATE): the kubelet retrying
    prepare, or reporting the same health again, cannot loop.
    """
    pod = f"{item.pod.namespace}/{item.pod.name}"
    if isinstance(item, UnresolvedDevice):
        workflow_type = names.UNRESOLVED_DEVICE
        attributes = search.for_unresolved_device(item)
        summary, details = (f"{pod}: {item.resource_id} {item.health.value}, device unknown",
                            describe.unresolved_details(item))
    else:
        workflow_type = names.CONFIG_INCIDENT
        attributes = search.for_config_problem(item)
        summary, details = f"{pod}: bad configuration, {item.message}", describe.config_details(item)
    try:
        await client.start_workflow(
            workflow_type, item, id=item.workflow_id, task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=attributes if search_attributes else None,
            static_summary=summary[:200], static_details=details,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def deliver_stall(client: Client, item: WorkloadStall, policies: PolicySet, *, task_queue: str,
                        search_attributes: bool = True) -> str | None:
    """Open the workload's stall incident (``WorkloadStall.workflow_id``) with the policy of its devices'
    driver; a running one is left to finish (``USE_EXISTING``): one stall incident per workload at a time.
    Returns the run id."""
    policy = policies.for_driver(item.driver)
    handle = await client.start_workflow(
        names.WORKLOAD_STALL,
        StallInput(stall=item, policy_ref=ref_of(policy), search_attributes=search_attributes),
        id=item.workflow_id, task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        memo={POLICY_MEMO: pack(policy)},
        search_attributes=search.for_workload(item.driver, item.namespace, item.name,
                                              [f"{p.pod.namespace}/{p.pod.name}" for p in item.pods])
        if search_attributes else None,
        static_summary=f"{item.words}: no step for {item.stalled_s:g}s, no device "
                       f"fault"[:200],
    )
    return handle.result_run_id


async def deliver_maintenance(client: Client, notice: MaintenanceNotice, policies: PolicySet, *, task_queue: str,
                              search_attributes: bool = True) -> tuple[str | None, str]:
    """Open the node's maintenance incident (``maintenance/<node>``) or tell the running one of a new reading;
    a notice gone (withdrawn, or the maintenance began) only tells a running one. The ``default`` entry's
    policy applies: a node may hold devices of several drivers. Returns the run id (``None``: nothing open)
    and what was done, in words."""
    policy = policies.for_driver("default")
    if notice.deadline is None and not notice.problem:
        run_id = await _tell_open(client, notice.workflow_id, names.NOTICE_CHANGED, notice)
        return run_id, "" if run_id else "no maintenance announced and none open"
    if not policy.maintenance.enabled:
        return None, "maintenance.enabled is false in the policy: not opened"
    handle = await client.start_workflow(
        names.NODE_MAINTENANCE,
        MaintenanceInput(notice=notice, policy_ref=ref_of(policy), search_attributes=search_attributes),
        id=notice.workflow_id, task_queue=task_queue,
        start_signal=names.NOTICE_CHANGED, start_signal_args=[notice],
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        memo={POLICY_MEMO: pack(policy)},
        search_attributes=search.for_maintenance(notice.node) if search_attributes else None,
        static_summary=(f"maintenance of {notice.node} at {notice.deadline:%Y-%m-%d %H:%M:%S}Z" if notice.deadline
                        else f"maintenance notice of {notice.node} unreadable: {notice.problem}")[:200],
    )
    return handle.result_run_id, ""
