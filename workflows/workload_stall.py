"""A workload that stopped stepping with no device saying why: end one rank, so its controller restarts it now.

The ingest saw no reporting pod of the workload move its ``podmedic.io/progress`` for the window
(``workers/ingest/sources/progress.py``). Left alone, the collective timeout ends every rank later
(10 minutes by default for NCCL) and the controller restarts the workload then; ending one rank now
starts the same restart without the wait (``podmedic/domain/stall.py`` says why). The incident:

1. reads the steps once more: a step that landed meanwhile ends it, ``cleared``, nothing done;
2. asks the fleet guard, like every disruptive step (a partition that hangs a hundred jobs does not
   restart them all at once); held, it waits, and ends ``cleared`` if the steps move meanwhile;
3. tells every pod of the stall (a Kubernetes Event) and ends one rank: the one furthest behind, the
   first by name among equals; its pod is deleted within ``detection.stall.grace_s`` (a hung process does
   not act on SIGTERM), by UID, so a retry never ends its replacement;
4. waits up to ``detection.stall.verify_s`` for the steps to move again: ``restarted``, else ``failed``.

One incident per workload at a time (``workload/<ns>/<kind>/<name>``); a dry-run policy records what it
would do and does nothing.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.fleet_guard import GuardActivities
    from activities.notice import NoticeActivities
    from activities.stall import EndRankInput, StallActivities, StepsReading, WatchStepsInput
    from podmedic.domain import search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.fleet_guard.messages import PermitRelease, PermitRequest
    from podmedic.domain.incident import StepNotice
    from podmedic.domain.models import DeviceRef, Outcome
    from podmedic.domain.policy import DriverPolicy
    from podmedic.domain.stall import StalledPod, StallInput, StallOutcome, step_order
    from workflows.activity_options import GIVE_BACK, URGENT
    from workflows.policy_memo import policy_in_force
    from workflows.record.timeline import PlainTimeline

READ = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10)


@workflow.defn(name=names.WORKLOAD_STALL)
class WorkloadStallWorkflow(PlainTimeline):
    """Ends one rank of a stalled workload and verifies it steps again."""

    def __init__(self) -> None:
        self.timeline: list[str] = []
        self.ended: StalledPod | None = None
        self.asked_guard = False

    @workflow.run
    async def run(self, inp: StallInput) -> StallOutcome:
        """Confirm, ask the guard, end one rank, verify; a call that keeps failing ends it ``failed``, saying
        which (the workload is then left to its own collective timeout)."""
        before = ", ".join(f"{p.pod.name}={p.step}" for p in inp.stall.pods)
        policy, problem = policy_in_force(inp.policy_ref)
        if problem:
            return await self._finish(inp, Outcome.FAILED, problem, before)
        try:
            return await self._act(inp, policy, before)
        except ActivityError as err:
            return await self._finish(inp, Outcome.FAILED, f"{err.activity_type} kept failing ({err.cause or err}); "
                                                            "the workload is left to its own timeout", before)

    async def _act(self, inp: StallInput, policy: DriverPolicy, before: str) -> StallOutcome:
        stall, incident = inp.stall, workflow.info().workflow_id
        rules = policy.detection.stall
        self._note(f"no step for {stall.stalled_s:g}s across {len(stall.pods)} reporting pod(s) of {stall.words} "
                   f"(window {stall.after_s:g}s) and no device reports a fault: hung")
        reading = await self._steps(inp)
        if reading.moved:
            return await self._finish(inp, Outcome.CLEARED, f"moving again before podmedic acted: {reading.moved}",
                                      before)
        rank = min(stall.pods, key=lambda p: (step_order(p.step), p.pod.name))
        action = (f"end rank {rank.pod.name} (furthest behind, at step {rank.step}) so that the {stall.kind}'s "
                  f"controller restarts it now rather than at the collective timeout")
        if policy.dry_run:
            self._note(f"dry-run: would {action}")
            return await self._finish(inp, Outcome.DRY_RUN, f"dry run: would {action}", before)
        held = await self._permit(inp, policy, rank)
        if held:
            return await self._finish(inp, Outcome.CLEARED, held, before)
        await self._tell(inp, "PodmedicWorkloadStalled", f"podmedic: {stall.kind} {stall.name} made no step for "
                                                          f"{stall.stalled_s:g}s with no device fault: will {action}")
        ended = await workflow.execute_activity_method(
            StallActivities.end_stalled_rank, EndRankInput(incident_id=incident, pod=rank.pod, grace_s=rules.grace_s),
            start_to_close_timeout=timedelta(seconds=60), retry_policy=READ, summary=f"end rank {rank.pod.name}",
            priority=URGENT)
        self.ended = rank
        self._note(f"rank {rank.pod.name} ended (pod deleted, grace {rules.grace_s:g}s)" if ended else
                   f"rank {rank.pod.name} was gone already: its workload is restarting")
        self._note(f"waiting up to {rules.verify_s:g}s for the steps to move again")
        reading = await self._steps(inp, rules.verify_s, verifying=True)
        if not reading.moved:
            return await self._finish(inp, Outcome.FAILED, f"rank {rank.pod.name} ended, but no step moved within "
                                                            f"{rules.verify_s:g}s (steps: {_steps(reading)})", before)
        await self._tell(inp, "PodmedicWorkloadRestarted", f"podmedic: {stall.kind} {stall.name} steps again after "
                                                           f"rank {rank.pod.name} ended: {reading.moved}")
        return await self._finish(inp, Outcome.RESTARTED, f"rank {rank.pod.name} ended; the {stall.kind} restarted "
                                                           f"and steps again: {reading.moved}", before, reading)

    async def _steps(self, inp: StallInput, timeout_s: float = 0.0, *, verifying: bool = False) -> StepsReading:
        """The steps now (``timeout_s`` 0), or once one moves; before acting a stalled pod gone counts as
        moving (its workload restarts by itself), when ``verifying`` only a step does."""
        stall = inp.stall
        watch = WatchStepsInput(namespace=stall.namespace, kind=stall.kind, name=stall.name, group=stall.group,
                                pods=[p.pod for p in stall.pods], since={p.pod.uid: p.step for p in stall.pods},
                                timeout_s=timeout_s, poll_s=max(1.0, min(15.0, timeout_s / 60)),
                                gone_moves=not verifying)
        return await workflow.execute_activity_method(
            StallActivities.watch_steps, watch, start_to_close_timeout=timedelta(seconds=timeout_s + 60),
            heartbeat_timeout=timedelta(seconds=60) if timeout_s else None, retry_policy=READ,
            summary=f"steps of {stall.kind} {stall.name}" + (f" for up to {timeout_s:g}s" if timeout_s else ""))

    async def _permit(self, inp: StallInput, policy: DriverPolicy, rank: StalledPod) -> str:
        """Wait for the fleet guard's permit; why not to act when the steps moved meanwhile (else ``""``)."""
        guard = policy.guard
        if guard is None or not guard.enabled:
            return ""
        if rank.device is None:
            self._note("fleet guard: no device of the rank is known; asked on the workload's behalf by its node")
        driver, pool, device = (rank.device or f"{inp.stall.driver}/{rank.node or 'unknown'}/stalled").split("/")
        request = PermitRequest(incident_id=workflow.info().workflow_id, node=rank.node, step="end_rank",
                                device=DeviceRef(driver=driver, pool=pool, device=device), policy=guard,
                                search_attributes=inp.search_attributes, hardware=False)
        held = ""
        while True:
            answer = await workflow.execute_activity_method(
                GuardActivities.ask_guard, request, start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=0),
                summary=f"ask the fleet guard: end rank {rank.pod.name}", priority=URGENT)
            self.asked_guard = True
            if answer.granted:
                if held:
                    self._note(f"fleet guard allows it now: {answer.detail}")
                return ""
            if held != answer.detail:
                held = answer.detail
                self._note(f"fleet guard holds ending a rank ({answer.limit}): {answer.detail}")
            await workflow.sleep(timedelta(seconds=guard.retry_s), summary="fleet guard holds end_rank")
            reading = await self._steps(inp)
            if reading.moved:
                return f"moving again while the fleet guard held the action: {reading.moved}"

    async def _tell(self, inp: StallInput, reason: str, message: str) -> None:
        """An Event on every pod of the stall; a refusal is noted, never fatal."""
        notice = StepNotice(incident_id=workflow.info().workflow_id, run_id=workflow.info().run_id,
                            step=reason.removeprefix("Podmedic").lower(), reason=reason, message=message,
                            pods=[p.pod for p in inp.stall.pods][:50], warning=reason == "PodmedicWorkloadStalled")
        try:
            await workflow.execute_activity_method(
                NoticeActivities.notify_step, notice, start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3), summary=f"{reason} on {len(notice.pods)} pod(s)")
        except ActivityError as err:
            self._note(f"pods not told ({reason}): {err.cause or err}")
            return
        self._note(f"{reason} recorded on {len(notice.pods)} pod(s)")

    async def _finish(self, inp: StallInput, outcome: Outcome, explanation: str, before: str,
                      after: StepsReading | None = None) -> StallOutcome:
        self._note(f"closed: {outcome.value}: {explanation}")
        if inp.search_attributes and workflow.info().typed_search_attributes.get(search.PHASE) is not None:
            workflow.upsert_search_attributes([search.PHASE.value_set("Closed"),
                                               search.OUTCOME.value_set(outcome.value)])
        if self.asked_guard:
            try:
                await workflow.execute_activity_method(
                    GuardActivities.release_guard, PermitRelease(incident_id=workflow.info().workflow_id),
                    start_to_close_timeout=timedelta(seconds=10), retry_policy=GIVE_BACK,
                    summary="give back the fleet guard's permit")
            except ActivityError as err:
                self._note(f"permit not given back (the guard keeps counting it): {err.cause or err}")
        return StallOutcome(incident_id=workflow.info().workflow_id, outcome=outcome, explanation=explanation,
                            ended=self.ended.pod if self.ended else None, steps_before=before,
                            steps_after=_steps(after) if after else "", timeline=list(self.timeline))


def _steps(reading: StepsReading) -> str:
    return ", ".join(f"{name}={step}" for name, step in sorted(reading.steps.items())) or "no reporting pod"
