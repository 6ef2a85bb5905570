"""The device incident workflow: detect → fence → checkpoint → taint → recover → ticket → close.

One workflow per device (id ``device/<driver>/<pool>/<device>``). Health events arrive as
signals (signal-with-start), so duplicates and several ingest replicas join one incident.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.discover import DiscoverActivities
    from podmedic.domain import describe, search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.classify import classify
    from podmedic.domain.flapping import transitions_within
    from podmedic.domain.incident import (
        IncidentOutcome,
        IncidentState,
        IncidentStopped,
        Phase,
        VendorWaitCarry,
        fold_timeline,
    )
    from podmedic.domain.models import (
        DeviceHealthEvent,
        IncidentInput,
        Outcome,
        Permanence,
        TimelineEntry,
    )
    from podmedic.domain.node import NodeIncidentNotice
    from podmedic.domain.steps import DiscoverInput, Discovery
    from workflows.activity_options import URGENT, activity_options
    from workflows.closing import vendor_wait_carry
    from workflows.closing.close import Closer, dry_run_close, let_go_if_stopped
    from workflows.device import disruptive_steps, move_off, repeat_offender
    from workflows.device.operator_updates import OperatorHandlers, OperatorRequests
    from workflows.device.recovery_ladder import run_ladder
    from workflows.device.report_to_node import report_to_node
    from workflows.device.settle import corroborate, settle
    from workflows.policy_memo import policy_in_force
    from workflows.record import metrics
    from workflows.record.pod_notices import PodNotices, drain, tell_pods
    from workflows.record.search_attributes import SearchAttributeWriter
    from workflows.waiting import guard_permit, storm_turn
    from workflows.waiting.wait import WaitState

__all__ = ["DeviceIncidentWorkflow", "IncidentStopped"]

@workflow.defn(name=names.DEVICE_INCIDENT)
class DeviceIncidentWorkflow(OperatorHandlers):
    """Drives one device incident to a terminal, explained outcome; operators steer it with
    the updates in ``workflows/device/operator_updates.py``."""

    @workflow.init
    def __init__(self, inp: IncidentInput) -> None:
        self.inp = inp
        self.policy, self.policy_problem = policy_in_force(inp.policy_ref)
        self.state = IncidentState(incident_id=inp.device.workflow_id, device=inp.device)
        self.events: list[DeviceHealthEvent] = []
        self.operator = OperatorRequests()
        self._seen: set[str] = set()
        self.canceled = ""  # why, once a Temporal cancel request closed the incident
        self.work: asyncio.Task[IncidentOutcome] | None = None
        self.abort_cancels = False  # abort canceled the work (``stop_work``)
        self.attributes = SearchAttributeWriter(bool(inp.search_attributes))
        self.waits = WaitState()
        self.notices = PodNotices()
        self.placements = move_off.Placements()
        self.carry = VendorWaitCarry.model_validate_json(inp.carry) if inp.carry else None
        if self.carry is not None:
            self._seen = vendor_wait_carry.take_up(self, self.carry)

    # -- operators and detectors ---------------------------------------------------------
    @workflow.signal(name=names.HEALTH_EVENT)
    def health_event(self, event: DeviceHealthEvent) -> None:
        """A detector's observation; repeats of an event id are dropped."""
        if event.event_id in self._seen:
            return
        self._seen.add(event.event_id)
        self.events.append(event)
        self.state.events_seen += 1  # across runs: a continued run carries only the latest reports
        self.note("detect", f"{event.source}: {event.health.value} {event.reason} {event.message}".strip())
        self._check_flapping()

    @workflow.signal
    def node_incident(self, notice: NodeIncidentNotice) -> None:
        """The device's node became the incident: several of its devices failed together."""
        if self.state.node_incident is None:
            self.state.node_incident = notice.incident_id
            self.placements.node_incident_at = workflow.now()
            self.note("correlate", f"part of node incident {notice.incident_id}: {', '.join(notice.devices)}")

    @workflow.signal
    def guard_wake(self) -> None:
        """The fleet guard has room again (a permit freed, a storm ended): ask it now."""
        self.waits.guard_woke = True

    @workflow.signal
    def storm_turn(self) -> None:
        """The storm's keeper lets this fenced incident act now (``workflows/fleet/storm_turn_keeper.py``)."""
        self.waits.turn_given = True

    # -- the pipeline ----------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: IncidentInput) -> IncidentOutcome:
        """Run the pipeline; every path ends in an ``IncidentOutcome``, told to the pods."""
        self.attributes.start()
        # The work runs as a task of its own, shielded: a Temporal cancel request reaches this await
        # whatever the work is doing (and whatever it catches), and the incident closes here.
        self.work = work = asyncio.create_task(self._work())
        try:
            outcome = await asyncio.shield(work)
        except asyncio.CancelledError:
            work.cancel()
            if self.abort_cancels and self.operator.abort_request is not None:  # the work was canceled by abort
                outcome = self.finish(Outcome.ABORTED, self._aborted())
            else:
                self.canceled = self._canceled()
                outcome = self.finish(Outcome.ABORTED, self.canceled)
        await guard_permit.release(self)
        await storm_turn.give_back(self)
        await let_go_if_stopped(self, outcome)
        good = outcome.outcome in (Outcome.RECOVERED_IN_PLACE, Outcome.RECOVERED_RESCHEDULED,
                                   Outcome.RESOLVED_BY_VENDOR, Outcome.CLEARED)
        await tell_pods(self, "closed", f"incident closed: {outcome.outcome.value}: {outcome.explanation}",
                        warning=not good)
        await drain(self)
        self.attributes.stop()
        # The record closes with what the notices written at the close noted (one they could not write).
        return outcome.model_copy(update={"timeline": list(self.state.timeline),
                                          "timeline_folded": self.state.timeline_folded})

    async def _work(self) -> IncidentOutcome:
        """The pipeline, closed with its outcome; after a cancel request it only stops."""
        try:
            if self.policy_problem:
                raise IncidentStopped(Outcome.FAILED, f"{self.policy_problem}; nothing was done")
            return await self._pipeline()
        except IncidentStopped as stop:
            if self.canceled:
                raise asyncio.CancelledError(self.canceled) from stop
            return self.finish(stop.outcome, stop.explanation)
        except ActivityError as err:
            if self.canceled:
                raise asyncio.CancelledError(self.canceled) from err
            if self.abort_cancels and self.operator.abort_request is not None and isinstance(err.cause, CancelledError):
                return self.finish(Outcome.ABORTED, self._aborted())  # the step abort cut short
            cause = err.cause or err
            return self.finish(Outcome.FAILED, f"step {self.state.phase.value} gave up: {cause}")

    def stop_work(self) -> None:
        """An operator's ``abort``: cancel the work where it waits (every wait, by construction)."""
        if self.work is not None:
            self.abort_cancels = True
            self.work.cancel()

    def _aborted(self) -> str:
        assert self.operator.abort_request is not None
        return f"aborted by {self.operator.abort_request.by}: {self.operator.abort_request.reason}"

    def _canceled(self) -> str:
        """Why the incident ends on a Temporal cancel request, in words (the request names nobody to it)."""
        step = self.state.pending_approval.step if self.state.pending_approval else "incident"
        self._decide(step, "canceled", "temporal", f"cancel request in phase {self.state.phase.value}")
        return (f"canceled from Temporal (a cancel request: the UI's Cancel or `temporal workflow cancel`) in phase "
                f"{self.state.phase.value}")

    async def _pipeline(self) -> IncidentOutcome:
        if self.carry is not None:  # a continued run: its vendor wait goes on where the last run's stood
            closer = Closer(self)
            closer.read_healthy = self.carry.read_healthy
            return await closer.after_ticket(self.carry.deadline, self.carry.gap_s, news_from=0)
        await workflow.wait_condition(lambda: bool(self.events))
        event = await corroborate(self, await settle(self))
        verdict = classify(event, self.policy)
        self.state.failure_mode, self.state.permanence = verdict.failure_mode, verdict.permanence
        self.state.why = verdict.why
        if self.state.flapping and verdict.actionable and self.permanent:
            self.state.permanence = Permanence.PERMANENT
            self.state.why = f"{verdict.why}; flapping"
        self.state.node = event.node
        self.note("classify", verdict.why)
        self.upsert(search.FAILURE_MODE, verdict.failure_mode.value)
        if not verdict.actionable:
            raise IncidentStopped(Outcome.NOT_ACTIONABLE, verdict.why)
        if "detect" not in self.state.steps:  # detected and classified: the fence may come before discovery
            self.state.steps.append("detect")
        fenced = await disruptive_steps.fence(self)
        await storm_turn.wait_turn(self)
        # Three reads that do not depend on each other: one round trip before the checkpoint, not three.
        *_, discovery = await asyncio.gather(report_to_node(self, event), repeat_offender.check(self), self._discover())
        permanent = self.permanent
        plan = (f"fenced: DeviceTaintRule {self.state.taint_rule} NoSchedule (no new pod gets it); podmedic will "
                "checkpoint and recover" if self.state.taint_rule else "podmedic will checkpoint, taint and recover")
        await tell_pods(self, "opened", f"device {self.inp.device.resource_id} {event.health.value}: {verdict.why}; "
                                        f"{plan}", warning=True)
        await disruptive_steps.checkpoint_and_taint(self, discovery, permanent, fenced)

        recovery = self.policy.recovery
        rungs = repeat_offender.ladder(self, recovery.permanent if permanent else recovery.transient)
        self.enter(Phase.RECOVERING, "recover", f"recovering {len(discovery.pods)} pod(s)")
        for pod in discovery.pods:
            result = await run_ladder(self, pod, rungs)
            self.state.recovery.append(result)
            metrics.recovered(self.inp.device.driver, self.events, result)
            self.track_pods()
            self.placements.remember(result, workflow.now())
        await move_off.if_due(self)
        if self.policy.dry_run:
            return dry_run_close(self, self.permanent)
        return await Closer(self).close(self.permanent)

    def _check_flapping(self) -> None:
        rule = self.policy.detection.flapping
        if self.state.flapping:
            return
        changes = transitions_within(self.events, rule.window_s)
        if changes >= rule.transitions:
            self.state.flapping = True
            treat = "; treated as a permanent failure" if rule.permanent else ""
            self.note("detect", f"flapping: {changes} health changes within {rule.window_s:g}s{treat}")

    @property
    def permanent(self) -> bool:
        """Whether the incident is about a failure a restart will not clear (now, as known)."""
        flapping = self.state.flapping and self.policy.detection.flapping.permanent
        return self.state.permanence is Permanence.PERMANENT or flapping

    async def _discover(self) -> Discovery:
        self.enter(Phase.DISCOVERING, "detect", f"finding the pods on {self.inp.device.resource_id}")
        discovery = await workflow.execute_activity_method(
            DiscoverActivities.discover_device,
            DiscoverInput(incident_id=self.state.incident_id, device=self.inp.device,
                          reported_by=list(dict.fromkeys(e.pod for e in self.events if e.pod)),
                          first_event=min(e.observed_at for e in self.events)),
            **activity_options(self.policy.steps.discover, f"find pods on {self.inp.device.resource_id}",
                               priority=URGENT),
        )
        self.state.pods = discovery.pods
        self.state.node = discovery.node or self.state.node
        if self.state.node:
            self.upsert(search.NODE, self.state.node)
        if discovery.pods:
            self.upsert(search.NAMESPACE, discovery.pods[0].namespace)
            jobs = [p.job for p in discovery.pods if p.job]
            if jobs:
                self.upsert(search.JOB, jobs[0])
        self.track_pods()
        names = ", ".join(f"{p.namespace}/{p.name}" for p in discovery.pods) or "none"
        self.note("detect", f"device {discovery.reading.health.value} ({discovery.reading.message}); pods: {names}")
        if (workload := discovery.workload) is not None:
            others = [f"{p.namespace}/{p.name}" for p in discovery.job_pods]
            self.note("detect", describe.workload_line(workload, others))
        return discovery

    # -- helpers shared with recovery and closing ------------------------------------------
    def request_id(self, purpose: str, attempt: int = 0) -> str:
        """A request id that is the same on every retry and replay of this run's step."""
        run = workflow.info().run_id[:8]
        return f"{self.state.incident_id}#{run}#{purpose}#{attempt}"

    def check_abort(self) -> None:
        """End the incident if an operator asked to, or stop its work once Temporal canceled it."""
        if self.canceled:
            raise IncidentStopped(Outcome.ABORTED, self.canceled)
        if self.operator.abort_request is not None:
            raise IncidentStopped(Outcome.ABORTED, self._aborted())

    def enter(self, phase: Phase, step: str | None, doing: str | None = None) -> None:
        """Move to ``phase`` doing ``doing``; ``step`` is recorded once in the list of stages that ran."""
        self.check_abort()
        self.state.phase = phase
        if doing:
            self.state.doing = doing
        if step and step not in self.state.steps:
            self.state.steps.append(step)
        self.upsert(search.PHASE, phase.value)
        metrics.phase_entered(self.inp.device.driver, phase.value)
        self.refresh_details()

    def finished(self, step: str) -> None:
        """An operator-visible step ran to its end (it can no longer be skipped)."""
        self.operator.done.add(step)
        self.operator.running = None

    def refresh_details(self) -> None:
        """Rewrite the incident's current details in the Temporal UI."""
        workflow.set_current_details(describe.current_details(self.state))

    def note(self, step: str, message: str) -> None:
        """Add a line to the timeline (workflow time, so replay gives the same record)."""
        self.state.timeline.append(TimelineEntry(at=workflow.now(), step=step, message=message))
        fold_timeline(self.state)

    def upsert(self, key: SearchAttributeKey[Any], value: object | None) -> None:
        """Set (``None``: unset) a search attribute, only when its value changes
        (``workflows/record/search_attributes.py``)."""
        self.attributes.set(key, value)

    def track_pods(self) -> None:
        """Keep ``PodmedicPods`` naming every pod the incident touched (replacements too)."""
        pods = [f"{p.namespace}/{p.name}" for p in self.state.pods]
        pods += [f"{r.pod.namespace}/{r.pod.name}" for r in self.state.recovery if r.pod is not None]
        if pods:
            self.upsert(search.PODS, list(dict.fromkeys(pods)))

    def finish(self, outcome: Outcome, explanation: str) -> IncidentOutcome:
        """Close the record with an outcome."""
        self.state.phase = Phase.CLOSED
        self.state.doing = f"closed: {outcome.value}"
        self.state.pending_approval = None
        self.upsert(search.PHASE, Phase.CLOSED.value)
        self.upsert(search.OUTCOME, outcome.value)
        self.upsert(search.AWAITING_APPROVAL, None)
        self.note("close", f"{outcome.value}: {explanation}")
        metrics.closed(self.inp.device.driver, outcome.value)
        workflow.set_current_details(describe.current_details(self.state) + f"\n\n**Outcome**: {explanation}")
        verified = [r for r in self.state.recovery if r.verified]
        return IncidentOutcome(
            incident_id=self.state.incident_id,
            device=self.inp.device.resource_id,
            outcome=outcome,
            explanation=explanation,
            failure_mode=self.state.failure_mode,
            permanence=self.state.permanence,
            steps=list(self.state.steps),
            checkpoint_ids=self.state.checkpoint.checkpoint_ids if self.state.checkpoint else [],
            checkpoint=self.state.checkpoint.summary if self.state.checkpoint else "",
            taint_rule=self.state.taint_rule,
            taint_removed=self.state.taint_removed,
            recovered_by=verified[-1].action if verified else None,
            pod=verified[-1].pod if verified else None,
            ticket_id=self.state.ticket_id,
            timeline=list(self.state.timeline),
            timeline_folded=self.state.timeline_folded,
            decisions=list(self.state.decisions),
        )
