"""Closing an incident: wait for the device to heal or the vendor to fix it, then untaint."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.discover import DiscoverActivities
    from activities.taint import TaintActivities
    from podmedic.domain.flapping import healthy_after_the_failure
    from podmedic.domain.incident import IncidentOutcome, Phase
    from podmedic.domain.models import Health, Outcome
    from podmedic.domain.steps import DeviceInput, UntaintInput
    from workflows.activity_options import GIVE_BACK, activity_options
    from workflows.closing import unseen_device, vendor_ticket
    from workflows.context import IncidentContext
    from workflows.device import move_off
    from workflows.waiting.wait import wait_for



def dry_run_close(wf: IncidentContext, permanent: bool) -> IncidentOutcome:
    """End a dry-run incident: what closing would have done, recorded; nothing waited for or filed."""
    ticket = wf.policy.ticket
    wants = ticket.file_when_permanent if permanent else ticket.file_when_unhealed
    if ticket.backend != "none" and wants:
        why = "the failure is permanent" if permanent else "if the device does not heal"
        wf.note("ticket", f"dry-run: would file a vendor ticket ({ticket.backend}) because {why}")
    else:
        wf.note("ticket", f"dry-run: no vendor ticket (backend {ticket.backend})")
    wf.note("close", "dry-run: would untaint once the device verifies healthy for "
                     f"{wf.policy.close.anti_flap_s:g}s")
    return wf.finish(Outcome.DRY_RUN, f"dry run of {wf.policy.driver}: every decision recorded; nothing in the "
                                      "cluster changed and no ticket filed")


STOPPED = (Outcome.ABORTED, Outcome.FAILED)


async def let_go_if_stopped(wf: IncidentContext, outcome: IncidentOutcome) -> None:
    """Take this run off its DeviceTaintRule when the incident stopped without deciding about the device.

    The rule is never deleted here: the device may still be broken, so a rule left with no holder stays,
    marked as left by this run, and the sweep (``activities/rule_sweep.py``) deletes it once a source reads
    the device Healthy, or opens the device's incident again while it reads Unhealthy.
    """
    rule = wf.state.taint_rule
    if outcome.outcome not in STOPPED or not rule or wf.state.taint_removed or wf.policy.dry_run:
        return
    try:
        result = await workflow.execute_activity_method(
            TaintActivities.remove_taint,
            UntaintInput(incident_id=wf.state.incident_id, device=wf.inp.device, rule_name=rule,
                         stopped=f"{wf.state.incident_id} {outcome.outcome.value}: {outcome.explanation}"[:1000]),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=GIVE_BACK,
            summary=f"let go of DeviceTaintRule {rule}",
        )
    except ActivityError as err:
        wf.note("close", f"DeviceTaintRule {rule} still names this run ({err.cause or err}): the fleet guard's "
                         "sweep takes it off")
        return
    wf.note("close", f"DeviceTaintRule {rule} let go: {result.detail}")


class Closer:
    """The last stages of one incident; split out of the workflow class to keep each small."""

    def __init__(self, wf: IncidentContext) -> None:
        self.wf = wf
        self.policy = wf.policy
        self.verified_healthy = False
        self.read_healthy = False  # a read answered Healthy (pod status, the driver): a source that sees it
        self.unverified = ""
        self.resolved_by = ""

    async def close(self, permanent: bool) -> IncidentOutcome:
        """Ticket if needed, wait for the fix, untaint, and end with an outcome."""
        recovered = [r for r in self.wf.state.recovery if r.verified]
        workload = self.workload()
        healed_in_place = any(r.action == "in_place_restart" for r in recovered)
        self.read_healthy = healed_in_place  # verified on the restarted pod's own device status
        healed = healed_in_place or (not permanent and await self._wait_heal())
        if healed and await self._stays_healthy():
            untainted = await self._untaint()
            outcome = (
                Outcome.RECOVERED_IN_PLACE if healed_in_place
                else Outcome.RECOVERED_RESCHEDULED if recovered else Outcome.CLEARED
            )
            return self.wf.finish(outcome, f"device healthy again; {workload}; {untainted}")
        ticket = self.policy.ticket
        wants = ticket.file_when_permanent if permanent else ticket.file_when_unhealed
        if ticket.backend == "none" or not wants or not await self._file_ticket():
            return self.wf.finish(
                Outcome.QUARANTINED,
                f"device not healthy and no vendor ticket filed; {workload}; " + (
                    f"DeviceTaintRule {self.wf.state.taint_rule} kept for an operator" if self.wf.state.taint_rule
                    else "no DeviceTaintRule in force"),
            )
        return await self.after_ticket()

    def workload(self) -> str:
        """What became of the incident's workload, for the outcome."""
        recovered = [r for r in self.wf.state.recovery if r.verified]
        return (f"workload recovered by {recovered[-1].action}" if recovered
                else "no workload to recover" if not self.wf.state.pods
                else "workload NOT recovered")

    async def after_ticket(self, deadline: dt.datetime | None = None, gap: float | None = None,
                           news_from: int | None = None) -> IncidentOutcome:
        """Wait for the vendor (from where a continued run's carry says it stood), untaint, and end."""
        ticket, workload = self.policy.ticket, self.workload()
        if await self._wait_vendor(deadline, gap, news_from):
            untainted = await self._untaint()
            if not self.resolved_by:  # nobody resolved the ticket: the device's own report ended the wait
                told = await vendor_ticket.note_given_back(self.wf)
                return self.wf.finish(
                    Outcome.CLEARED, f"device reported Healthy with ticket {self.wf.state.ticket_id} still open "
                                     f"(not resolved by the vendor); {workload}; {untainted}" + (f"; {told}" if told
                                                                                                 else ""))
            return self.wf.finish(
                Outcome.RESOLVED_BY_VENDOR,
                f"ticket {self.wf.state.ticket_id} resolved by {self.resolved_by}; {workload}; {untainted}",
            )
        if self.unverified:
            return self.wf.finish(
                Outcome.QUARANTINED, f"{self.unverified}; {workload}; DeviceTaintRule {self.wf.state.taint_rule} kept")
        return self.wf.finish(
            Outcome.QUARANTINED,
            f"ticket {self.wf.state.ticket_id} unresolved after {ticket.wait_resolution_s:g}s; "
            f"{workload}; DeviceTaintRule {self.wf.state.taint_rule} kept",
        )

    async def read_health(self) -> Health:
        reading = await workflow.execute_activity_method(
            DiscoverActivities.read_device_health,
            DeviceInput(device=self.wf.inp.device),
            **activity_options(self.policy.steps.close, f"read health of {self.wf.inp.device.resource_id}"),
        )
        self.read_healthy = self.read_healthy or reading.health is Health.HEALTHY
        return reading.health

    async def _wait_heal(self) -> bool:
        """Wait up to the policy's heal time for evidence that the device is healthy."""
        close = self.policy.close
        self.wf.enter(Phase.AWAITING_HEAL, "close", f"waiting up to {close.heal_wait_s:g}s for the device to report "
                                                    "Healthy")
        self.wf.note("close", f"waiting up to {close.heal_wait_s:g}s for the device to report Healthy")
        deadline = workflow.now() + timedelta(seconds=close.heal_wait_s)
        while True:
            if healthy_after_the_failure(self.wf.events) or await self.read_health() is Health.HEALTHY:
                self.wf.note("close", "device reports Healthy")
                return True
            remaining = (deadline - workflow.now()).total_seconds()
            if remaining <= 0:
                self.wf.note("close", f"device did not report Healthy within {close.heal_wait_s:g}s")
                return False
            await self.sleep(min(close.poll_s, remaining), "poll device health")
            self.wf.check_abort()

    async def _stays_healthy(self) -> bool:
        """Anti-flap: the device must still not be Unhealthy after the policy's delay."""
        delay = self.policy.close.anti_flap_s
        self.wf.enter(Phase.AWAITING_HEAL, "close", f"device healthy; staying tainted {delay:g}s (anti-flap) "
                                                    "before untainting")
        seen = len(self.wf.events)
        # A late report of the old fault (observed before the device turned Healthy) is not a new failure.
        healthy_since = max(
            (e.observed_at for e in self.wf.events if e.health is Health.HEALTHY), default=workflow.now()
        )
        await self.sleep(delay, f"anti-flap delay {delay:g}s")
        flapped = any(
            e.health is Health.UNHEALTHY and e.observed_at > healthy_since for e in self.wf.events[seen:]
        )
        health = Health.UNHEALTHY if flapped else await self.read_health()
        if health is Health.UNHEALTHY:
            self.wf.note("close", f"device unhealthy again within the {delay:g}s anti-flap delay")
            return False
        unseen = not self.read_healthy and not healthy_after_the_failure(self.wf.events)
        if unseen:
            self.wf.note("close", "no source that can see the device has reported it Healthy since the failure")
            return False
        self.verified_healthy = True
        return True

    async def _file_ticket(self) -> bool:
        return await vendor_ticket.file_ticket(self.wf)

    async def _wait_vendor(self, deadline: dt.datetime | None = None, gap: float | None = None,
                           news_from: int | None = None) -> bool:
        """Wait for a resolve signal, a Healthy event, or the backend saying resolved; then verify the device.
        A Healthy event with nobody's resolution must hold for the anti-flap delay, or the wait goes on."""
        deadline = deadline or workflow.now() + timedelta(seconds=self.policy.ticket.wait_resolution_s)
        while True:
            if not await vendor_ticket.wait_vendor(self, deadline, gap, news_from):
                return False
            gap = news_from = None  # after an anti-flap check the wait starts afresh
            if self.resolved_by or await self._stays_healthy():
                break
            self.wf.note("ticket", f"device Unhealthy again: ticket {self.wf.state.ticket_id} stays open, the "
                                   "incident waits for the vendor")
        if not self.resolved_by:
            # The device held Healthy with nobody's word yet: the vendor may have marked the ticket
            # resolved meanwhile (a repair is seen before its ticket is closed), or a person resolved it.
            if self.wf.operator.resolution is not None:
                self.resolved_by = self.wf.operator.resolution.by
            else:
                await vendor_ticket.vendor_resolved(self)
        if await vendor_ticket.verify_fixed(self):
            return True
        self.unverified = self.unverified or (f"ticket {self.wf.state.ticket_id} resolved but the device did not "
                                              "verify healthy")
        return False

    async def sleep(self, seconds: float, summary: str, wake: Callable[[], bool] | None = None) -> None:
        """Sleep, waking early for a resolution, an abort, or when ``wake`` says so; a pod placed on a
        node that became the incident meanwhile is moved off first (``workflows/device/move_off.py``)."""
        window = self.policy.detection.node_correlation.window_s
        deadline = workflow.now() + timedelta(seconds=seconds)

        def woken() -> bool:
            asked = self.wf.operator
            return asked.resolution is not None or asked.abort_request is not None or (wake is not None and wake())

        while True:
            await wait_for(lambda: woken() or bool(self.wf.placements.due(window)),
                           at_most_s=(deadline - workflow.now()).total_seconds(), summary=summary)
            moving = bool(self.wf.placements.due(window))
            await move_off.if_due(self.wf)
            if not moving or woken() or workflow.now() >= deadline:
                return

    async def _untaint(self) -> str:
        """Release the incident's DeviceTaintRule; what happened to it, for the outcome.

        Only once the device verified healthy for the anti-flap delay or someone resolved the
        incident: any other way here (a Healthy report while waiting for the vendor) verifies
        first. The rule is deleted only if no other incident holds it (a newer run of the same
        device, a node incident covering it) and nobody edited it; otherwise it is kept and
        the reason recorded.
        """
        state = self.wf.state
        if not state.taint_rule:
            covered = f" (covered by node incident {state.node_incident})" if state.node_incident else ""
            return f"no DeviceTaintRule of its own to remove{covered}"
        approved = unseen_device.STEP in self.wf.operator.approved  # an operator's word for a device nothing can see
        if (not (self.verified_healthy or approved) and self.wf.operator.resolution is None
                and not await self._stays_healthy()):
            self.wf.note("close", f"DeviceTaintRule {state.taint_rule} kept: the device did not verify healthy")
            return f"DeviceTaintRule {state.taint_rule} kept (device not verified healthy)"
        self.wf.enter(Phase.UNTAINTING, "close", f"removing DeviceTaintRule {state.taint_rule}")
        result = await workflow.execute_activity_method(
            TaintActivities.remove_taint,
            UntaintInput(incident_id=state.incident_id, device=self.wf.inp.device, rule_name=state.taint_rule),
            **activity_options(self.policy.steps.close, f"release DeviceTaintRule {state.taint_rule}"),
        )
        state.taint_removed = result.removed
        self.wf.note("close", f"DeviceTaintRule {state.taint_rule} {result.detail}")
        return "taint removed" if result.removed else f"DeviceTaintRule {state.taint_rule} {result.detail}"
