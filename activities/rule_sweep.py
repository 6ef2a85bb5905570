"""The sweep of podmedic's DeviceTaintRules for holders that closed without letting go.

A run terminated or reset from Temporal runs none of its cleanup: it stays on the holders list
(``activities/holders.py``) of every rule it held, and a rule held by a closed run is never deleted by
anyone. The fleet guard (``workflows/fleet/guard.py``) runs this sweep every ``guard.sweep_s``. A holder
whose incident's latest run closed without its close (``LEAKED``) at least ``guard.sweep_grace_s`` ago is
taken off, and the rule records who took it off and why (``podmedic.io/changed-by``,
``podmedic.io/reason``). A rule left with no holder is never simply dropped while its device may still
be broken; its device's health decides:

- Healthy (a pod's ``allocatedResourcesStatus`` can see it): the rule is deleted;
- Unhealthy: a new run of the device's incident opens, with the closed run's input and policy and
  its first report, and takes the rule over as any new incident of the device does;
- Unknown (no pod uses it, no driver taint): the rule stays, marked ``podmedic.io/orphaned-from``, for
  the device's next report to take over or an operator to delete (``kubectl delete devicetaintrule``).

Each sweep looks at every rule with no holder again, so a device read Unknown today and Healthy later
loses its rule then. Everything here is idempotent: a patch or a delete is sent only at the version
read, and a reopened incident is started with ``USE_EXISTING``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from activities import holders
from activities.running_incidents import ClosedRun, closed_among
from podmedic.domain import search
from podmedic.domain import workflow_names as names
from podmedic.domain.base import Obj
from podmedic.domain.fleet_guard.messages import SweepInput, SweepReport
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, IncidentInput
from podmedic.domain.steps import DeviceHealthReading
from podmedic.kube.errors import Conflict
from podmedic.kube.gateway import KubeGateway

SELECTOR = f"{holders.MANAGED_BY}=podmedic"
LEAKED = frozenset({"terminated", "failed", "timed_out", "not found"})
"""How a run closes without its close: terminated (or reset away), failed, timed out, or gone past the
namespace's retention, which says nothing of how it closed. A run that completed or was canceled ran its
close: one that stopped without verifying its device let go there (``workflows/closing/close.py``), and a hold a
completed one kept is deliberate ("kept for an operator"): the sweep leaves it."""

ReadHealth = Callable[[DeviceRef], Awaitable[DeviceHealthReading]]


class RuleSweepActivities:
    """The sweep, over one gateway, one Temporal client and the worker's device health reads."""

    def __init__(self, kube: KubeGateway, client: Client, read_health: ReadHealth) -> None:
        self.api, self.client, self.read_health = kube.aio, client, read_health

    @activity.defn(name="sweep_taint_rules")
    async def sweep_taint_rules(self, inp: SweepInput) -> SweepReport:
        """Take closed runs off podmedic's rules; settle the rules left with no holder by their device's health."""
        rules = await self.api.list_taint_rules(SELECTOR)
        report = SweepReport()
        ids = sorted({h.split("@", 1)[0] for rule in rules for h in holders.holders_of(rule)})
        closed = await closed_among(self.client, ids) if ids else {}
        now = dt.datetime.now(dt.UTC)
        for rule in rules:
            if holders.edited_by_operator(rule):
                continue
            name = str(rule["metadata"]["name"])
            gone = _closed_holders(rule, closed, now, inp.grace_s)
            if gone:
                why = "; ".join(f"{h}: {closed[h.split('@', 1)[0]].status}" for h in gone)
                plan = holders.plan_reclaim(rule, gone, why)
                if plan.action != "patch":
                    continue
                try:
                    rule = await self.api.patch_taint_rule(name, plan.patch)
                except Conflict:  # changed since read: the next sweep decides on the new version
                    report.kept.append(f"{name}: changed while swept; looked at again next sweep")
                    continue
                report.changed.append(f"{name}: {plan.detail}")
            left_by = holders.orphaned_from(rule)
            if left_by is not None:
                await self._settle(rule, name, left_by, report)
        return report

    async def _settle(self, rule: Obj, name: str, left_by: str, report: SweepReport) -> None:
        """A rule nobody holds: its device's health says whether it goes, is taken over, or stays."""
        selector = (rule.get("spec") or {}).get("deviceSelector") or {}
        try:
            device = DeviceRef(driver=selector["driver"], pool=selector["pool"], device=selector["device"])
        except (KeyError, ValueError) as err:
            report.kept.append(f"{name}: no holder, and its deviceSelector names no single device ({err}): "
                               "kept for an operator")
            return
        reading = await self.read_health(device)
        if reading.health is Health.HEALTHY:
            try:
                await self.api.delete_taint_rule_if_unchanged(name, rule["metadata"]["resourceVersion"])
            except Conflict:
                report.kept.append(f"{name}: changed while swept; looked at again next sweep")
                return
            report.changed.append(f"{name}: deleted: no holder, and {device.resource_id} reads Healthy "
                                  f"({reading.source})")
        elif reading.health is Health.UNHEALTHY and left_by.split("@", 1)[0] != device.workflow_id:
            report.kept.append(f"{name}: no holder since {left_by} closed; {device.resource_id} reads Unhealthy "
                               f"({reading.source}): kept until the device's next report opens its incident "
                               "or an operator decides")
        elif reading.health is Health.UNHEALTHY:
            opened = await self._reopen(device, left_by, reading)
            report.changed.append(f"{name}: no holder, and {device.resource_id} reads Unhealthy ({reading.source}: "
                                  f"{reading.message}): {opened}")
        else:
            report.kept.append(f"{name}: no holder since {left_by} closed; {device.resource_id} reads Unknown "
                               "(no pod uses it, no driver taint): kept until a report or an operator decides")

    async def _reopen(self, device: DeviceRef, left_by: str, reading: DeviceHealthReading) -> str:
        """Open the device's incident again with what ``left_by`` was started with; what happened."""
        workflow_id, _, run_id = left_by.partition("@")
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id or None)
        start: IncidentInput | None = None
        first: DeviceHealthEvent | None = None
        task_queue = activity.info().task_queue
        async for past in handle.fetch_history_events():
            if past.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                attrs = past.workflow_execution_started_event_attributes
                (start,) = await self.client.data_converter.decode(attrs.input.payloads, [IncidentInput])
                task_queue = attrs.task_queue.name or task_queue
            elif past.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED and \
                    past.workflow_execution_signaled_event_attributes.signal_name == names.HEALTH_EVENT:
                (first,) = await self.client.data_converter.decode(
                    past.workflow_execution_signaled_event_attributes.input.payloads, [DeviceHealthEvent])
                break
        if start is None or first is None:
            return f"not reopened: {left_by}'s history has no start or no report to take up"
        memo = await (await handle.describe()).memo()
        now = dt.datetime.now(dt.UTC)
        event = first.model_copy(update={
            "source": "podmedic rule sweeper", "observed_at": now, "occurrence": "",
            "event_id": f"sweep/{left_by}/{now:%Y%m%dT%H%M%S}",
            "message": (f"{reading.source} reads it Unhealthy ({reading.message}) after {left_by} closed holding "
                        f"its DeviceTaintRule; first report: {first.message or first.reason}")[:1000]})
        new = await self.client.start_workflow(
            names.DEVICE_INCIDENT, start, id=workflow_id, task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal=names.HEALTH_EVENT, start_signal_args=[event], memo=memo,
            search_attributes=search.initial(device.driver, device.resource_id, first.node)
            if start.search_attributes else None)
        return f"incident {workflow_id} run {new.result_run_id} opened to take it over"


def _closed_holders(rule: Obj, closed: dict[str, ClosedRun], now: dt.datetime, grace_s: float) -> list[str]:
    """The holders of ``rule`` whose incident's latest run closed without its close (``LEAKED``) at least
    ``grace_s`` ago. Runs of one workflow id never overlap: the latest closed, every earlier one is too."""
    gone: list[str] = []
    for holder in holders.holders_of(rule):
        run = closed.get(holder.split("@", 1)[0])
        if run is not None and run.status in LEAKED and (
                run.closed_at is None or (now - run.closed_at).total_seconds() >= grace_s):
            gone.append(holder)
    return gone
