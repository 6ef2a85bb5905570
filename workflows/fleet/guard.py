"""The fleet guard: one workflow (``fleet/guard``) that every incident asks before it disrupts.

Incidents ask with the ``ask`` update (through the ``ask_guard`` activity, which starts the
guard if it is not running) and give back what they held with the ``release`` signal when
they close. During a storm the ingest also tells it of each failed device as it arrives (the
``sighted`` signal), so the storm is counted at the events' pace. The guard counts permits
against the policy's limits (``podmedic/domain/fleet_guard/limits.py``), trips on storms, opens a
fleet incident that explains what it saw, and resumes on an operator's ``resume`` update or after
the storm has been calm for ``storm.clear_s``. Refused incidents are woken (signal ``guard_wake``)
when room frees; they also ask again every ``retry_s``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, FailureError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.fleet_guard import GuardActivities
    from activities.rule_sweep import RuleSweepActivities
    from activities.spares import SpareActivities
    from podmedic.domain import search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.fleet_guard import limits as limits
    from podmedic.domain.fleet_guard.messages import (
        FleetSize,
        FleetSizeInput,
        GuardInput,
        GuardStatus,
        HoldersInput,
        PermitAnswer,
        PermitAnswers,
        PermitRelease,
        PermitRequest,
        PermitRequests,
        ResumeRequest,
        Sightings,
        StormRecord,
        SweepInput,
    )
    from podmedic.domain.fleet_guard.policy import GuardPolicy
    from podmedic.domain.spares import SparesInput, SparesReport
    from workflows.fleet.incident import FleetIncidentInput, FleetIncidentWorkflow

MAX_HISTORY_EVENTS = 4000
"""Continue-as-new well before Temporal's suggestion on a busy day: the ledger is small."""


@workflow.defn(name=names.FLEET_GUARD)
class FleetGuardWorkflow:
    """Holds the fleet's permits; one per Temporal namespace."""

    @workflow.init
    def __init__(self, inp: GuardInput) -> None:
        self.policy = inp.policy
        self.search_attributes = inp.search_attributes
        self.ledger = inp.ledger
        self.fleet = inp.fleet
        self.dirty = False
        self.wake: list[str] = []
        self.to_open: StormRecord | None = None
        self.to_close: list[tuple[str, str]] = []
        self.uncounted = False  # sightings not yet weighed for a storm (the fleet's size was unknown)
        self.holders_checked: dt.datetime | None = None
        self.rules_swept: dt.datetime | None = None
        self.sweep_kept: list[str] = []  # told once, not every sweep while a rule waits for its device
        self.spares_kept: dt.datetime | None = None
        self.spares: SparesReport | None = inp.spares

    # -- incidents -------------------------------------------------------------------------
    @workflow.update(name=names.ASK_MANY)
    async def ask_many(self, reqs: PermitRequests) -> PermitAnswers:
        """May each request's incident take its step now? Granted answers hold a permit until release. A
        worker's concurrent asks come in one update, in order (``activities/fleet_guard.py``), because
        Temporal admits only a few updates in flight per workflow."""
        await workflow.wait_condition(lambda: self.fleet is not None)
        return PermitAnswers(answers=[self._answer(req) for req in reqs.requests])

    def _answer(self, req: PermitRequest) -> PermitAnswer:
        self.policy = req.policy  # the newest incident's policy is the file in force
        now = workflow.now()
        if req.probe:
            return self._counted(limits.evaluate(self.ledger, req, self.fleet, now))
        if req.counts and req.hardware:
            limits.observe(self.ledger, req, now)
        if self.ledger.storm is None:
            found = limits.storm(self.ledger, self.policy, self.fleet, now)
            if found is not None:
                self._trip(found)
        # A node quarantine adds no device to the shares (its devices' incidents count them), so they
        # neither hold it nor count its permit.
        answer = limits.evaluate(self.ledger, req, self.fleet, now, shares=req.counts)
        if answer.granted:
            limits.grant(self.ledger, req, now, shares=req.counts)
        else:
            limits.wait(self.ledger, req.incident_id, now)
            # A refusal may be a closed run's leaked permit: the loop checks the holders when that is due.
            self.dirty = self.dirty or self._holders_due()
        # An ask wakes the loop only when it tripped the storm breaker (a fleet incident to open).
        self.dirty = self.dirty or self.to_open is not None
        return self._counted(answer)

    @workflow.signal(name=names.SIGHTED)
    def sighted(self, batch: Sightings) -> None:
        """The ingest saw these devices fail in a storm: count them now, not when their incidents ask (in a
        storm a worker reaches the asks of a thousand new incidents seconds behind their events)."""
        if limits.sight(self.ledger, batch.sightings, workflow.now()):
            self.uncounted = True
            self._count_sightings()

    def _count_sightings(self) -> None:
        """Trip if the sightings make a storm; once the fleet's size is known (a guard the ingest's signal
        started reads it first)."""
        if not self.uncounted or self.fleet is None:
            return
        self.uncounted = False
        if self.ledger.storm is None and (found := limits.storm(self.ledger, self.policy, self.fleet,
                                                               workflow.now())) is not None:
            self._trip(found)
            self.dirty = True

    @workflow.signal(name=names.RELEASE)
    def release(self, rel: PermitRelease) -> None:
        """An incident closed: its device and node no longer count as disrupted now."""
        if limits.release(self.ledger, rel.incident_id):
            self.wake.extend(i for i in self.ledger.waiting if i not in self.wake)
        self.dirty = True

    @workflow.signal(name=names.POLICY_IN_FORCE)
    def policy_in_force(self, policy: GuardPolicy) -> None:
        """The policy file in force, told by the ingest when it starts: warm spares are kept (or given back)
        before any incident asks (``workers/ingest/guard_sightings.py``)."""
        self.policy = policy
        self.dirty = True

    # -- operators -------------------------------------------------------------------------
    @workflow.update
    def resume(self, req: ResumeRequest) -> GuardStatus:
        """End a storm pause now; what tripped it cannot trip it again."""
        self._resume(f"resumed by {req.by}: {req.reason}")
        return self.status()

    @resume.validator
    def _validate_resume(self, req: ResumeRequest) -> None:
        if not req.by.strip():
            raise ValueError("'by' must name who is resuming")
        if not req.reason.strip():
            raise ValueError("a reason is required to resume")
        if self.ledger.storm is None:
            raise ValueError("the guard is not tripped")

    @workflow.query
    def status(self) -> GuardStatus:
        """Permits, waiting incidents, storm and fleet sizes."""
        ledger = self.ledger
        return GuardStatus(state="tripped" if ledger.storm else "ok", devices_tainted=len(ledger.permits),
                           nodes_disrupted=len(limits.nodes_disrupted(ledger)), permits=list(ledger.permits.values()),
                           waiting=list(ledger.waiting), waiting_since=dict(ledger.waiting_since),
                           storm=ledger.storm, clear_since=ledger.clear_since,
                           fleet=self.fleet, policy=self.policy, history=list(ledger.history), spares=self.spares)

    # -- the loop --------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: GuardInput) -> None:
        """Refresh fleet sizes, watch the storm, wake waiters; continue-as-new to bound history."""
        while True:
            await self._refresh_fleet()
            self._count_sightings()
            now = workflow.now()
            limits.prune(self.ledger, self.policy, now)
            self._watch_storm()
            await self._reclaim()
            await self._sweep()
            await self._keep_spares()
            await self._fleet_incidents()
            await self._send_wakes()
            info = workflow.info()
            if info.is_continue_as_new_suggested() or info.get_current_history_length() > MAX_HISTORY_EVENTS:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(GuardInput(policy=self.policy, search_attributes=self.search_attributes,
                                                    ledger=self.ledger, fleet=self.fleet, spares=self.spares))
            self.dirty = False
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self.dirty, timeout=timedelta(seconds=self._tick()),
                                              timeout_summary="guard tick")

    def _tick(self) -> float:
        wait = self.policy.fleet_refresh_s
        if self.fleet is not None and self.fleet.read_at is not None:
            wait = self.policy.fleet_refresh_s - (workflow.now() - self.fleet.read_at).total_seconds()
        if self.ledger.storm is not None:
            wait = min(wait, self.policy.storm.window_s / 10, self.policy.storm.clear_s / 10)
        if self.ledger.waiting and self.ledger.permits:
            wait = min(wait, self._holders_wait())
        if self.rules_swept is not None:
            wait = min(wait, self._sweep_wait())
        if self._spares_wanted():
            wait = min(wait, self._spares_wait())
        return max(wait, 1.0)

    def _sweep_wait(self) -> float:
        if self.rules_swept is None:
            return 0.0
        return self.policy.sweep_s - (workflow.now() - self.rules_swept).total_seconds()

    async def _sweep(self) -> None:
        """Sweep podmedic's DeviceTaintRules every ``sweep_s`` (``activities/rule_sweep.py``): a run terminated
        or reset from Temporal stays a holder of its rules, and a rule held by a closed run is never deleted."""
        if self._sweep_wait() > 0:
            return
        self.rules_swept = workflow.now()
        try:
            swept = await workflow.execute_activity_method(
                RuleSweepActivities.sweep_taint_rules, SweepInput(grace_s=self.policy.sweep_grace_s),
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=RetryPolicy(maximum_attempts=3, maximum_interval=timedelta(seconds=30)),
                summary="take closed runs off podmedic's DeviceTaintRules")
        except ActivityError as err:  # the rules stay held until the next sweep: tainted too long, never too short
            self._remember(f"{workflow.now():%H:%M:%S} DeviceTaintRules not swept: {err.cause or err}")
            return
        for line in [*swept.changed, *(k for k in swept.kept if k not in self.sweep_kept)]:
            self._remember(f"{workflow.now():%H:%M:%S} swept {line}")
        self.sweep_kept = swept.kept

    def _spares_wanted(self) -> bool:
        """Spares to keep, or ones kept to give back (``per_pool`` lowered to 0)."""
        return self.policy.spares.per_pool > 0 or (self.spares is not None and self.spares.held > 0)

    def _spares_wait(self) -> float:
        if self.spares_kept is None:
            return 0.0
        return self.policy.spares.every_s - (workflow.now() - self.spares_kept).total_seconds()

    async def _keep_spares(self) -> None:
        """Keep ``spares.per_pool`` warm spares in every pool every ``spares.every_s`` (``activities/spares.py``)."""
        if not self._spares_wanted() or self._spares_wait() > 0 or not workflow.patched("keep-spares"):
            return
        self.spares_kept = workflow.now()
        try:
            kept = await workflow.execute_activity_method(
                SpareActivities.keep_spares, SparesInput(policy=self.policy.spares),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=RetryPolicy(maximum_attempts=3, maximum_interval=timedelta(seconds=30)),
                summary="keep warm spares")
        except ActivityError as err:  # the spares stay as they are until the next keeping
            self._remember(f"{workflow.now():%H:%M:%S} spares not kept: {err.cause or err}")
            return
        for line in [*kept.changed, *kept.refused]:
            self._remember(f"{workflow.now():%H:%M:%S} {line}")
        self.spares = kept

    def _holders_wait(self) -> float:
        """Seconds until the holders are checked again: every ``reclaim_s`` while an incident waits,
        every ``fleet_refresh_s`` otherwise (a leaked permit then holds nobody back)."""
        every = self.policy.reclaim_s if self.ledger.waiting else self.policy.fleet_refresh_s
        if self.holders_checked is None:
            return 0.0
        return every - (workflow.now() - self.holders_checked).total_seconds()

    def _holders_due(self) -> bool:
        return bool(self.ledger.permits) and self._holders_wait() <= 0

    async def _reclaim(self) -> None:
        """Free the permits of runs that closed without giving them back: a run terminated or reset from
        Temporal runs no cleanup, and its permit would otherwise count against the limits for ever."""
        if not self._holders_due():
            return
        self.holders_checked = workflow.now()
        try:
            closed = await workflow.execute_activity_method(
                GuardActivities.closed_holders, HoldersInput(incidents=sorted(self.ledger.permits)),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3, maximum_interval=timedelta(seconds=10)),
                summary=f"are the {len(self.ledger.permits)} permit holders still running")
        except ActivityError as err:  # the permits stay counted until the next check: too many, never too few
            self._remember(f"{workflow.now():%H:%M:%S} permit holders not checked: {err.cause or err}")
            return
        for holder in closed:
            if limits.release(self.ledger, holder.incident_id):
                self._remember(f"{workflow.now():%H:%M:%S} freed the permit of {holder.incident_id}: its run "
                               f"closed ({holder.status}) without giving it back")
                self.wake.extend(i for i in self.ledger.waiting if i not in self.wake)

    async def _refresh_fleet(self) -> None:
        now = workflow.now()
        fresh = (self.fleet is not None and self.fleet.read_at is not None
                 and (now - self.fleet.read_at).total_seconds() < self.policy.fleet_refresh_s)
        if fresh:
            return
        try:
            fleet = await workflow.execute_activity_method(
                GuardActivities.fleet_size, FleetSizeInput(),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=30)),
                summary="count devices per driver and pool from ResourceSlices",
            )
            self.fleet = fleet.model_copy(update={"read_at": now})  # workflow time: the activity's clock differs
        except ActivityError as err:  # keep the last sizes; with none yet, shares are not limited (at-once limits are)
            if self.fleet is None:
                self.ledger.history.append(f"{now:%H:%M:%S} fleet sizes unreadable: {err}")
                self.fleet = FleetSize(read_at=now)

    def _trip(self, found: StormRecord) -> None:
        now = workflow.now()
        found.fleet_incident = f"fleet/storm/{now:%Y%m%dT%H%M%S}"
        self.ledger.storm = found
        self.ledger.clear_since = None
        self.to_open = found
        self._remember(f"{now:%H:%M:%S} tripped: {found.summary}; fleet incident {found.fleet_incident}")

    def _watch_storm(self) -> None:
        """While tripped: resume once the share stayed under the threshold for ``clear_s``."""
        if self.ledger.storm is None:
            return
        now = workflow.now()
        if limits.storm(self.ledger, self.policy, self.fleet, now) is not None:
            self.ledger.clear_since = None
            return
        if self.ledger.clear_since is None:
            self.ledger.clear_since = now
        calm = (now - self.ledger.clear_since).total_seconds()
        if calm >= self.policy.storm.clear_s:
            self._resume(f"storm cleared: under {self.policy.storm.share:.0%} for {calm:g}s")

    def _resume(self, why: str) -> None:
        storm = self.ledger.storm
        if storm is None:
            return
        now = workflow.now()
        self.ledger.storm = None
        self.ledger.storms_since = now
        self.ledger.clear_since = None
        self.to_close.append((storm.fleet_incident, why))
        self.wake.extend(i for i in self.ledger.waiting if i not in self.wake)
        self._remember(f"{now:%H:%M:%S} {why}")
        self.dirty = True

    def _remember(self, line: str) -> None:
        self.ledger.history = [*self.ledger.history, line][-20:]

    async def _fleet_incidents(self) -> None:
        """Open the fleet incident of a new trip; close those of resumed storms."""
        if self.to_open is not None:
            storm, self.to_open = self.to_open, None
            attributes = TypedSearchAttributes([SearchAttributePair(search.DRIVER, storm.driver),
                                                SearchAttributePair(search.PHASE, "Tripped")])
            await workflow.start_child_workflow(
                FleetIncidentWorkflow.run, FleetIncidentInput(storm=storm, search_attributes=self.search_attributes),
                id=storm.fleet_incident, parent_close_policy=ParentClosePolicy.ABANDON,
                search_attributes=attributes if self.search_attributes else None,
                static_summary=f"storm: {storm.summary}"[:200],
            )
        while self.to_close:
            incident, why = self.to_close.pop(0)
            with contextlib.suppress(FailureError):  # already closed by hand: nothing to tell it
                await workflow.get_external_workflow_handle(incident).signal(FleetIncidentWorkflow.storm_over, why)

    async def _send_wakes(self) -> None:
        while self.wake:
            incident = self.wake.pop(0)
            try:
                await workflow.get_external_workflow_handle(incident).signal("guard_wake")
            except FailureError:  # closed meanwhile: it released (or will release) what it held
                limits.unwait(self.ledger, incident)

    def _counted(self, answer: PermitAnswer) -> PermitAnswer:
        return answer.model_copy(update={"devices_tainted": len(self.ledger.permits),
                                         "nodes_disrupted": len(limits.nodes_disrupted(self.ledger)),
                                         "tripped": self.ledger.storm is not None})
