"""The device incident workflow: detect → checkpoint → taint → recover → ticket → close.

One workflow per device (id ``device/<driver>/<pool>/<device>``). Health events arrive as
signals (signal-with-start), so duplicates and several ingest replicas join one incident.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.checkpoint import CheckpointActivities
    from activities.discover import DiscoverActivities
    from activities.node import NodeActivities
    from activities.taint import TaintActivities
    from podmedic.classify import classify
    from podmedic.flapping import transitions_within
    from podmedic.incident import AbortRequest, IncidentOutcome, IncidentState, Phase, Resolution
    from podmedic.models import (
        DeviceHealthEvent,
        Health,
        IncidentInput,
        Outcome,
        Permanence,
        TimelineEntry,
    )
    from podmedic.node import NodeDeviceReport, NodeIncidentNotice, NodeReportInput, NodeWatchInput
    from podmedic.steps import (
        CheckpointInput,
        CheckpointReport,
        CheckpointStatus,
        DiscoverInput,
        Discovery,
        PodCheckpoint,
        TaintInput,
    )
    from workflows import search
    from workflows.closing import Closer
    from workflows.options import activity_options
    from workflows.recovery import run_ladder


class IncidentStopped(Exception):
    """Raised inside the workflow to end early with a given outcome."""

    def __init__(self, outcome: Outcome, explanation: str) -> None:
        super().__init__(explanation)
        self.outcome = outcome
        self.explanation = explanation


@workflow.defn(name="DeviceIncident")
class DeviceIncidentWorkflow:
    """Drives one device incident to a terminal, explained outcome."""

    @workflow.init
    def __init__(self, inp: IncidentInput) -> None:
        self.inp = inp
        self.policy = inp.policy
        self.state = IncidentState(incident_id=inp.device.workflow_id, device=inp.device)
        self.events: list[DeviceHealthEvent] = []
        self._seen: set[str] = set()
        self.resolution: Resolution | None = None
        self.abort: AbortRequest | None = None

    # -- operators and detectors ---------------------------------------------------------
    @workflow.signal
    def health_event(self, event: DeviceHealthEvent) -> None:
        """A detector's observation; repeats of an event id are dropped."""
        if event.event_id in self._seen:
            return
        self._seen.add(event.event_id)
        self.events.append(event)
        self.state.events_seen = len(self.events)
        self.note("detect", f"{event.source}: {event.health.value} {event.reason} {event.message}".strip())
        self._check_flapping()

    @workflow.signal
    def resolve(self, resolution: Resolution) -> None:
        """The device was repaired or replaced (operator or vendor callback)."""
        self.resolution = resolution
        self.note("resolve", f"resolved by {resolution.by}: {resolution.note}")

    @workflow.signal
    def abort_incident(self, request: AbortRequest) -> None:
        """Stop acting; what was done stays done and is recorded."""
        self.abort = request
        self.note("abort", f"abort requested by {request.by}: {request.reason}")

    @workflow.signal
    def node_incident(self, notice: NodeIncidentNotice) -> None:
        """The device's node became the incident: several of its devices failed together."""
        if self.state.node_incident is None:
            self.state.node_incident = notice.incident_id
            self.note("correlate", f"part of node incident {notice.incident_id}: {', '.join(notice.devices)}")

    @workflow.query
    def get_state(self) -> IncidentState:
        """The incident as it is now."""
        return self.state

    # -- the pipeline ----------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: IncidentInput) -> IncidentOutcome:
        """Run the pipeline; every path ends in an ``IncidentOutcome``."""
        try:
            return await self._pipeline()
        except IncidentStopped as stop:
            return self.finish(stop.outcome, stop.explanation)
        except ActivityError as err:
            cause = err.cause or err
            return self.finish(Outcome.FAILED, f"step {self.state.phase.value} gave up: {cause}")

    async def _pipeline(self) -> IncidentOutcome:
        await workflow.wait_condition(lambda: bool(self.events))
        event = await self._settle()
        verdict = classify(event, self.policy)
        self.state.failure_mode, self.state.permanence = verdict.failure_mode, verdict.permanence
        self.state.why = verdict.why
        if self.state.flapping and verdict.actionable and self.permanent:
            self.state.permanence = Permanence.PERMANENT
            self.state.why = f"{verdict.why}; flapping"
        self.state.node = event.node
        self.note("classify", verdict.why)
        self._upsert(search.FAILURE_MODE, verdict.failure_mode.value)
        if not verdict.actionable:
            raise IncidentStopped(Outcome.NOT_ACTIONABLE, verdict.why)
        await self._report_to_node(event)

        discovery = await self._discover()
        permanent = self.permanent
        report = await self._checkpoint(discovery, permanent)
        self.state.checkpoint = report

        self.enter(Phase.TAINTING, "taint")
        effect = self.policy.taint.permanent if permanent else self.policy.taint.transient
        taint = await workflow.execute_activity_method(
            TaintActivities.taint_device,
            TaintInput(incident_id=self.state.incident_id, device=self.inp.device, effect=effect,
                       reason=verdict.why),
            **activity_options(self.policy.steps.taint, f"taint {self.inp.device.resource_id} {effect.value}"),
        )
        self.state.taint_rule = taint.rule_name
        self.note("taint", f"DeviceTaintRule {taint.rule_name} ({effect.value}, "
                  f"{'created' if taint.created else 'already present'})")

        self.enter(Phase.RECOVERING, "recover")
        rungs = self.policy.recovery.permanent if permanent else self.policy.recovery.transient
        for pod in discovery.pods:
            result = await run_ladder(self, pod, rungs)
            self.state.recovery.append(result)
        return await Closer(self).close(self.permanent)

    async def _settle(self) -> DeviceHealthEvent:
        """The event that opens the incident for real.

        Unknown health becomes an incident only after the driver's grace period. A device
        that returns to Healthy is watched for the flapping window before the incident
        closes, so a device that keeps failing and recovering stays one incident.
        """
        index = 0
        while True:
            event = self.events[index]
            if event.health is Health.UNKNOWN:
                grace = self.policy.detection.unknown_grace_s
                self.enter(Phase.WAITING_GRACE, None)
                self.note("detect", f"health Unknown: waiting {grace:g}s grace for a clearer signal")
                found = await self._next_event(index, lambda e: e.health is not Health.UNKNOWN, grace,
                                               "Unknown-health grace period")
                if found is None:
                    self.note("detect", f"still Unknown after {grace:g}s: opening the incident")
                    return event
                index = found
                event = self.events[index]
            if event.health is not Health.HEALTHY:
                return event
            window = self.policy.detection.flapping.window_s
            self.enter(Phase.WATCHING, None)
            self.note("detect", f"device back to Healthy; watching {window:g}s for it to fail again")
            found = await self._next_event(index, lambda e: e.health is not Health.HEALTHY, window,
                                           "watch for flapping")
            if found is None:
                raise IncidentStopped(Outcome.CLEARED, "device returned to Healthy and stayed healthy "
                                      f"for the {window:g}s flapping window")
            index = found

    async def _next_event(self, after: int, wanted: Callable[[DeviceHealthEvent], bool], timeout_s: float,
                          summary: str) -> int | None:
        """Index of the first event after ``after`` that is ``wanted``, waiting up to ``timeout_s``."""
        def position() -> int | None:
            return next((i for i in range(after + 1, len(self.events)) if wanted(self.events[i])), None)
        try:
            await workflow.wait_condition(lambda: position() is not None, timeout=timedelta(seconds=timeout_s),
                                          timeout_summary=summary)
        except TimeoutError:
            return None
        return position()

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

    async def _report_to_node(self, event: DeviceHealthEvent) -> None:
        """Tell the node's watch; losing this only loses correlation, never the incident."""
        node = event.node or self.inp.device.pool
        if not node or self.state.failure_mode is None:
            return
        report = NodeDeviceReport(incident_id=self.state.incident_id, device=self.inp.device,
                                  failure_mode=self.state.failure_mode, observed_at=event.observed_at,
                                  why=self.state.why)
        watch = NodeWatchInput(node=node, driver=self.inp.device.driver,
                               correlation=self.policy.detection.node_correlation,
                               search_attributes=self.inp.search_attributes)
        try:
            await workflow.execute_activity_method(
                NodeActivities.report_to_node, NodeReportInput(watch=watch, report=report),
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=5)),
                summary=f"report to node {node}'s watch",
            )
        except ActivityError as err:
            self.note("correlate", f"node {node} not told (correlation skipped): {err.cause or err}")

    async def _discover(self) -> Discovery:
        self.enter(Phase.DISCOVERING, "detect")
        discovery = await workflow.execute_activity_method(
            DiscoverActivities.discover_device,
            DiscoverInput(incident_id=self.state.incident_id, device=self.inp.device,
                          reported_by=list(dict.fromkeys(e.pod for e in self.events if e.pod))),
            **activity_options(self.policy.steps.discover, f"find pods on {self.inp.device.resource_id}"),
        )
        self.state.pods = discovery.pods
        self.state.node = discovery.node or self.state.node
        if self.state.node:
            self._upsert(search.NODE, self.state.node)
        if discovery.pods:
            self._upsert(search.NAMESPACE, discovery.pods[0].namespace)
        names = ", ".join(f"{p.namespace}/{p.name}" for p in discovery.pods) or "none"
        self.note("detect", f"device {discovery.reading.health.value} ({discovery.reading.message}); pods: {names}")
        return discovery

    async def _checkpoint(self, discovery: Discovery, permanent: bool) -> CheckpointReport:
        self.enter(Phase.CHECKPOINTING, "checkpoint")
        policy = self.policy.checkpoint
        skip = None
        if not discovery.pods:
            skip = "no pod uses the device"
        elif not policy.enabled:
            skip = f"checkpoints disabled for {self.policy.driver}"
        elif permanent:
            skip = "device failed permanently: it cannot serve a checkpoint"
        if skip:
            last = [p.last_checkpoint_id for p in discovery.pods if p.last_checkpoint_id]
            self.note("checkpoint", f"skipped: {skip}; last known checkpoint(s): {', '.join(last) or 'none'}")
            return CheckpointReport(results=[
                PodCheckpoint(pod=p.name, method=p.checkpoint_method, status=CheckpointStatus.SKIPPED,
                              checkpoint_id=p.last_checkpoint_id, reason=skip)
                for p in discovery.pods
            ])
        report = await workflow.execute_activity_method(
            CheckpointActivities.request_checkpoints,
            CheckpointInput(incident_id=self.state.incident_id, request_id=self.request_id("ckpt"),
                            pods=discovery.pods, timeout_s=policy.timeout_s, poll_s=policy.poll_s),
            **activity_options(self.policy.steps.checkpoint, f"checkpoint {len(discovery.pods)} pod(s)",
                               min_start_to_close_s=policy.timeout_s + 30),
        )
        for r in report.results:
            self.note("checkpoint", f"{r.pod}: {r.status.value} {r.checkpoint_id or ''} {r.reason}".strip())
        return report

    # -- helpers shared with recovery and closing ------------------------------------------
    def request_id(self, purpose: str, attempt: int = 0) -> str:
        """A request id that is the same on every retry and replay of this run's step."""
        run = workflow.info().run_id[:8]
        return f"{self.state.incident_id}#{run}#{purpose}#{attempt}"

    def check_abort(self) -> None:
        """End the incident if an operator asked to."""
        if self.abort is not None:
            raise IncidentStopped(Outcome.ABORTED, f"aborted by {self.abort.by}: {self.abort.reason}")

    def enter(self, phase: Phase, step: str | None) -> None:
        """Move to ``phase``; ``step`` is recorded once in the list of stages that ran."""
        self.check_abort()
        self.state.phase = phase
        if step and step not in self.state.steps:
            self.state.steps.append(step)
        self._upsert(search.PHASE, phase.value)
        workflow.set_current_details(f"**{phase.value}** — {self.state.why or 'opening'}")

    def note(self, step: str, message: str) -> None:
        """Add a line to the timeline (workflow time, so replay gives the same record)."""
        self.state.timeline.append(TimelineEntry(at=workflow.now(), step=step, message=message))

    def _upsert(self, key: SearchAttributeKey[str], value: str) -> None:
        if self.inp.search_attributes:
            workflow.upsert_search_attributes([key.value_set(value)])

    def finish(self, outcome: Outcome, explanation: str) -> IncidentOutcome:
        """Close the record with an outcome."""
        self.state.phase = Phase.CLOSED
        self._upsert(search.PHASE, Phase.CLOSED.value)
        self._upsert(search.OUTCOME, outcome.value)
        self.note("close", f"{outcome.value}: {explanation}")
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
            taint_rule=self.state.taint_rule,
            taint_removed=self.state.taint_removed,
            recovered_by=verified[-1].action if verified else None,
            pod=verified[-1].pod if verified else None,
            ticket_id=self.state.ticket_id,
            timeline=list(self.state.timeline),
        )
