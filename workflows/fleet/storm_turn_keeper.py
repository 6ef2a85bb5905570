"""A storm's turn-keeper: lets at most ``storm_fence.acting`` of a driver's incidents act at once.

One per driver (``storm/<driver>``), started by the first fenced storm incident that asks
(``ask_turn``: signal-with-start). Incidents ask (signal ``ask``) once fenced, are admitted first
asked first (``admit_turns`` signals each its turn), and give their turn back when they close
(signal ``done``). An acting incident that ended without a word (terminated) is found by a look
at the acting incidents when nobody gave a turn back for ``RECHECK_S`` while others wait. The
keeper continues-as-new with who acts and who waits, and ends once none has for ``QUIET_S``.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.node import NodeActivities
    from activities.storm_turns import TurnActivities
    from podmedic.domain import search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.models import TimelineEntry
    from podmedic.domain.node import DeviceIncidentsInput
    from podmedic.domain.storm_turns import AdmitInput, TurnOver, TurnRequest, TurnsInput, TurnsState
    from workflows.activity_options import ONE_CALL, UNTIL_DONE, URGENT

RECHECK_S = 300.0
"""While some wait and no turn came back for this long, look whether the acting ones still run."""
QUIET_S = 120.0
"""The keeper ends once nobody acted or waited for this long (a later storm starts it again)."""
MAX_HISTORY_EVENTS = 4000
"""Continue-as-new well before Temporal's limits: the state carried is two lists of ids."""
TIMELINE_KEPT = 50



@workflow.defn(name=names.STORM_TURNS)
class StormTurnsWorkflow:
    """Keeps one driver's storm incidents to ``acting_limit`` acting at once, first asked first."""

    @workflow.init
    def __init__(self, inp: TurnsInput) -> None:
        self.inp = inp
        self.limit = inp.acting_limit
        self.acting: dict[str, None] = dict.fromkeys(inp.acting)  # insertion-ordered sets
        self.waiting: dict[str, None] = dict.fromkeys(i for i in inp.waiting if i not in self.acting)
        self.admitted = inp.admitted
        self.closed = inp.closed
        self.timeline: list[TimelineEntry] = []

    @workflow.signal
    def ask(self, req: TurnRequest) -> None:
        """A fenced incident waits for its turn (asking again changes nothing)."""
        self.limit = req.acting  # the newest incident's policy is the one in force
        if req.incident_id not in self.acting:
            self.waiting.setdefault(req.incident_id, None)

    @workflow.signal
    def done(self, over: TurnOver) -> None:
        """An incident closed: its turn (or its place in the queue) is free."""
        if over.incident_id in self.acting:
            del self.acting[over.incident_id]
            self.closed += 1
        self.waiting.pop(over.incident_id, None)

    @workflow.query
    def get_state(self) -> TurnsState:
        """How many act, how many wait, how many turns were given and given back."""
        return TurnsState(driver=self.inp.driver, acting_limit=self.limit, acting=len(self.acting),
                          waiting=len(self.waiting), admitted=self.admitted, closed=self.closed,
                          timeline=list(self.timeline))

    def note(self, message: str) -> None:
        """A timeline line (the last ``TIMELINE_KEPT``) and the UI's current details."""
        self.timeline = [*self.timeline[-(TIMELINE_KEPT - 1):],
                         TimelineEntry(at=workflow.now(), step="storm", message=message)]
        workflow.set_current_details(f"**{len(self.acting)}** of at most {self.limit} acting, "
                                     f"**{len(self.waiting)}** waiting; {self.admitted} turns given, "
                                     f"{self.closed} given back\n\n{message}")

    @workflow.run
    async def run(self, inp: TurnsInput) -> TurnsState:
        """Admit, wait for turns back, carry on as new when the history grows; end when quiet."""
        if inp.began is None:
            inp.began = workflow.now()
            self.note(f"storm of {inp.driver}: at most {self.limit} incidents act at once "
                      "(detection.storm_fence.acting); the rest wait fenced")
        while True:
            await self._admit()
            if not self.acting and not self.waiting:
                try:
                    await workflow.wait_condition(lambda: bool(self.waiting), timeout=timedelta(seconds=QUIET_S),
                                                  timeout_summary="quiet: no storm incident left")
                except TimeoutError:
                    if not self.waiting:  # an ask in the same task as the timer counts
                        break
                continue
            if self._history_long():
                workflow.continue_as_new(self._carried(inp))
            given_back = self.closed
            try:
                # Asks pile up while every turn is taken: the history's length wakes it too.
                await workflow.wait_condition(lambda: self._can_admit() or self._history_long(),
                                              timeout=timedelta(seconds=RECHECK_S), timeout_summary="turns given back")
            except TimeoutError:
                if self.waiting and self.closed == given_back:
                    await self._drop_ended()
        self.note(f"storm over: {self.admitted} turns given, {self.closed} given back")
        if inp.search_attributes:
            workflow.upsert_search_attributes([search.PHASE.value_set("Closed")])
        return self.get_state()

    @staticmethod
    def _history_long() -> bool:
        info = workflow.info()
        return info.get_current_history_length() > MAX_HISTORY_EVENTS or info.is_continue_as_new_suggested()

    def _can_admit(self) -> bool:
        return (bool(self.waiting) and len(self.acting) < self.limit) or not (self.acting or self.waiting)

    async def _admit(self) -> None:
        room = self.limit - len(self.acting)
        if room <= 0 or not self.waiting:
            return
        batch = list(self.waiting)[:room]
        for incident_id in batch:
            del self.waiting[incident_id]
            self.acting[incident_id] = None
        self.admitted += len(batch)
        told = await workflow.execute_activity_method(
            TurnActivities.admit_turns, AdmitInput(incident_ids=batch), start_to_close_timeout=ONE_CALL,
            retry_policy=UNTIL_DONE, priority=URGENT, summary=f"{len(batch)} incidents' turn"[:200])
        for gone in told.gone:
            self.done(TurnOver(incident_id=gone, driver=self.inp.driver))
        self.note(f"{len(batch)} admitted ({batch[0]}{' ...' if len(batch) > 1 else ''})"
                  + (f"; {len(told.gone)} had ended" if told.gone else ""))

    async def _drop_ended(self) -> None:
        """Acting incidents that no longer run (terminated: they gave nothing back) free their turns."""
        statuses = await workflow.execute_activity_method(
            NodeActivities.device_incidents_status, DeviceIncidentsInput(incidents=list(self.acting)),
            start_to_close_timeout=ONE_CALL, retry_policy=UNTIL_DONE, summary="are the acting incidents running")
        ended = [s.incident_id for s in statuses if not s.running and s.incident_id in self.acting]
        for incident_id in ended:
            self.done(TurnOver(incident_id=incident_id, driver=self.inp.driver))
        if ended:
            self.note(f"{len(ended)} acting incident(s) ended without giving their turn back: freed")

    def _carried(self, inp: TurnsInput) -> TurnsInput:
        return inp.model_copy(update={"acting_limit": self.limit, "acting": list(self.acting),
                                      "waiting": list(self.waiting), "admitted": self.admitted,
                                      "closed": self.closed})
