"""A node's announced maintenance: train on to the latest safe moment, then checkpoint and move, before the deadline.

The ingest reads the notice on the node (``podmedic/domain/maintenance.py`` says which and why) and starts
``maintenance/<node>`` with it; a changed or withdrawn notice is signalled (``notice``). The incident:

1. plans: the node's pods that hold devices, the slowest one's save time, the room elsewhere
   (``activities/maintenance.py``), and the moment to act, ``deadline - save_s - maintenance.lead_s``;
2. waits for that moment on a durable timer; a new deadline plans again, a withdrawal before acting ends it
   ``withdrawn`` with nothing done;
3. at the moment: cordons the node (taint ``podmedic.io/maintenance:NoSchedule``), asks every pod for a
   checkpoint (at most ``save_s``), and moves each pod with the ``any_node`` reschedule, a warm spare of the
   node's pool first; where no room waits elsewhere it says so and moves anyway: the node goes at the
   deadline whatever podmedic does, and a fresh checkpoint is all that can still be saved;
4. waits for the deadline, then for the node to go down and come back Ready with no maintenance
   announced (up to ``maintenance.back_s``), and lifts its cordon; a node not back by then keeps it, said.

It asks no fleet guard permit: the disruption is the cloud's and comes at the deadline whatever podmedic
does; moving first only decides where the pods are then. A dry-run policy says what it would do.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.checkpoints.checkpoint import CheckpointActivities
    from activities.maintenance import MaintenanceActivities, NodeBackInput
    from activities.quarantine import QuarantineActivities
    from activities.recovery.recover import RecoverActivities
    from podmedic.domain import search
    from podmedic.domain import workflow_names as names
    from podmedic.domain.maintenance import (
        MAINTENANCE_TAINT,
        MaintenanceInput,
        MaintenanceNotice,
        MaintenanceOutcome,
        MaintenancePlan,
        MovingPod,
        Outcome,
        PlanInput,
        act_at,
        request_id,
    )
    from podmedic.domain.node import QuarantineInput
    from podmedic.domain.policy import DriverPolicy
    from podmedic.domain.steps import CheckpointInput, RecoverInput, RecoveryResult
    from workflows.activity_options import URGENT
    from workflows.policy_memo import policy_in_force
    from workflows.record.timeline import PlainTimeline
    from workflows.waiting.wait import wait_for

READ = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10)
ONE_CALL = timedelta(seconds=60)


@workflow.defn(name=names.NODE_MAINTENANCE)
class NodeMaintenanceWorkflow(PlainTimeline):
    """Moves a node's pods off it at the latest safe moment before its announced maintenance."""

    @workflow.init
    def __init__(self, inp: MaintenanceInput) -> None:
        self.notice = inp.notice
        self.changed = False
        self.timeline: list[str] = []
        self.moved: list[str] = []
        self.cordoned = False

    @workflow.signal(name=names.NOTICE_CHANGED)
    def notice_changed(self, notice: MaintenanceNotice) -> None:
        """A newer reading of the node's notice: a new deadline, or none (withdrawn, or the maintenance began)."""
        if notice.event_id != self.notice.event_id:
            self.notice, self.changed = notice, True

    @workflow.run
    async def run(self, inp: MaintenanceInput) -> MaintenanceOutcome:
        """Plan, wait for the moment, cordon, checkpoint, move; wait for the node back and lift the cordon."""
        policy, problem = policy_in_force(inp.policy_ref)
        node = self.notice.node
        if problem or self.notice.problem:
            return self._finish(inp, "refused", problem or f"{self.notice.problem} ({self.notice.source})")
        if not policy.maintenance.enabled:
            return self._finish(inp, "refused", "maintenance.enabled is false in the policy: nothing done")
        try:
            return await self._act(inp, policy)
        except ActivityError as err:  # a call that kept failing: said, and the cordon not left behind
            why = f"{err.activity_type} kept failing ({err.cause or err})"
            if self.cordoned:
                try:
                    await self._cordon(node, policy, lift=True)
                except ActivityError as lift:
                    why += f"; the node's cordon ({MAINTENANCE_TAINT}) is left for a person: {lift.cause or lift}"
            return self._finish(inp, "failed", why)

    async def _act(self, inp: MaintenanceInput, policy: DriverPolicy) -> MaintenanceOutcome:
        node = self.notice.node
        plan = await self._wait_for_the_moment(policy)
        if plan is None and self.notice.problem:
            return self._finish(inp, "refused", f"{self.notice.problem} ({self.notice.source})")
        if plan is None:
            return self._finish(inp, "withdrawn", f"maintenance of {node} withdrawn before podmedic acted")
        if not plan.node_found:
            return self._finish(inp, "withdrawn", f"node {node} is gone: nothing to move")
        deadline = self.notice.deadline
        assert deadline is not None
        if policy.dry_run:
            return self._finish(inp, "dry_run", f"dry run: would cordon {node}, checkpoint and move "
                                                f"{len(plan.pods)} pod(s) before {deadline:%H:%M:%S}")
        self._note(f"acting {(deadline - workflow.now()).total_seconds():.0f}s before the deadline: {plan.room}")
        if inp.search_attributes and workflow.info().typed_search_attributes.get(search.PHASE) is not None:
            workflow.upsert_search_attributes([search.PHASE.value_set("Acting")])
        await self._cordon(node, policy, lift=False)
        try:
            moved = await self._move(plan, policy)
            return await self._after(inp, policy, moved, plan)
        except asyncio.CancelledError:  # canceled from Temporal: the node is not left cordoned by an incident gone
            await self._cordon(node, policy, lift=True)
            raise

    async def _wait_for_the_moment(self, policy: DriverPolicy) -> MaintenancePlan | None:
        """Plan, and wait until the moment to act; ``None`` when the notice is withdrawn first."""
        rules = policy.maintenance
        while True:
            deadline = self.notice.deadline
            if deadline is None:
                return None
            plan = await self._plan(policy)
            at = act_at(deadline, plan.save_s, rules.lead_s)
            self._note(f"maintenance of {self.notice.node} at {deadline:%Y-%m-%d %H:%M:%S}Z ({self.notice.source}); "
                       f"{len(plan.pods)} pod(s) with devices there (slowest save {plan.save_s:g}s); acting at "
                       f"{at:%H:%M:%S} (save + lead {rules.lead_s:g}s before); {plan.room}")
            self.changed = False
            wait = (at - workflow.now()).total_seconds()
            if wait > 0 and await wait_for(lambda: self.changed, at_most_s=wait, summary="the latest safe moment"):
                self._note("the notice changed: planning again")
                continue
            return await self._plan(policy)  # the pods as they are now, not as when announced

    async def _plan(self, policy: DriverPolicy) -> MaintenancePlan:
        return await workflow.execute_activity_method(
            MaintenanceActivities.plan_maintenance,
            PlanInput(node=self.notice.node, default_save_s=policy.checkpoint.timeout_s),
            start_to_close_timeout=ONE_CALL, retry_policy=READ, summary=f"pods and room of {self.notice.node}")

    async def _cordon(self, node: str, policy: DriverPolicy, *, lift: bool) -> None:
        request = QuarantineInput(node=node, incident_id=workflow.info().workflow_id, cordon=True,
                                  taint_key=MAINTENANCE_TAINT, effect="NoSchedule",
                                  reason=f"announced maintenance at {self.notice.deadline}: {self.notice.source}")
        call = QuarantineActivities.lift_quarantine if lift else QuarantineActivities.quarantine_node
        self.cordoned = self.cordoned or not lift  # set first: a cordon whose answer was lost is still undone
        result = await workflow.execute_activity_method(
            call, request, start_to_close_timeout=ONE_CALL, retry_policy=READ, priority=URGENT,
            summary=f"{'uncordon' if lift else 'cordon'} {node}")
        self.cordoned = not lift
        self._note(f"node {node}: {result.detail}")

    async def _move(self, plan: MaintenancePlan, policy: DriverPolicy) -> list[RecoveryResult]:
        """Checkpoint every pod, then move each (together: a synchronous job's ranks go at once)."""
        if not plan.pods:
            self._note("no pod with a device on the node: nothing to move")
            return []
        rid = request_id(self.notice)
        report = await workflow.execute_activity_method(
            CheckpointActivities.request_checkpoints,
            CheckpointInput(incident_id=workflow.info().workflow_id, request_id=f"{rid}-ckpt",
                            pods=[m.pod for m in plan.pods], timeout_s=plan.save_s,
                            poll_s=policy.checkpoint.poll_s, hang_s=policy.checkpoint.hang_s),
            start_to_close_timeout=timedelta(seconds=plan.save_s + 60), retry_policy=READ,
            summary=f"checkpoint {len(plan.pods)} pod(s) before the maintenance")
        self._note(f"checkpoint {report.summary}")
        results = await asyncio.gather(*(self._move_one(m, policy, rid) for m in plan.pods))
        return list(results)

    async def _move_one(self, moving: MovingPod, policy: DriverPolicy, rid: str) -> RecoveryResult:
        pod, timeout_s = moving.pod, max(policy.maintenance.lead_s, 30.0)
        try:
            result = await workflow.execute_activity_method(
                RecoverActivities.reschedule_any_node,
                RecoverInput(incident_id=workflow.info().workflow_id, request_id=f"{rid}-move-{pod.uid}", pod=pod,
                             device=moving.device, timeout_s=timeout_s, poll_s=policy.recovery.verify_poll_s,
                             eviction=policy.recovery.eviction, verify_progress=policy.recovery.verify_progress,
                             move_off=True),
                start_to_close_timeout=timedelta(seconds=2 * timeout_s + policy.recovery.eviction.max_wait_s + 30),
                retry_policy=READ, summary=f"move {pod.namespace}/{pod.name} off {self.notice.node}")
        except ActivityError as err:
            self._note(f"{pod.name} not moved: {err.cause or err}")
            return RecoveryResult(verified=False, action="any_node", pod=pod, detail=str(err.cause or err))
        for line in result.notes:
            self._note(f"{pod.name}: {line}")
        self._note(f"{pod.name}: {'moved' if result.verified else 'not moved'}; {result.detail}")
        if result.verified and result.pod is not None:
            self.moved.append(f"{pod.namespace}/{pod.name} -> {result.pod.name} on {result.pod.node}")
        return result

    async def _after(self, inp: MaintenanceInput, policy: DriverPolicy, moved: list[RecoveryResult],
                     plan: MaintenancePlan) -> MaintenanceOutcome:
        """Wait for the deadline and the node back, lift the cordon; the outcome of the move."""
        rules, node, deadline = policy.maintenance, self.notice.node, self.notice.deadline
        assert deadline is not None
        outcome: Outcome = "moved" if all(r.verified for r in moved) else "not_all_moved"
        if not plan.pods:
            outcome = "nothing_to_move"
        left = (deadline - workflow.now()).total_seconds()
        if left > 0:
            await workflow.sleep(timedelta(seconds=left), summary="the maintenance deadline")
        gone, until = False, deadline + timedelta(seconds=rules.back_s)
        while workflow.now() < until:
            back = await workflow.execute_activity_method(
                MaintenanceActivities.node_back, NodeBackInput(node=node), start_to_close_timeout=ONE_CALL,
                retry_policy=READ, summary=f"is {node} back")
            gone = gone or back.went_down
            if back.back and gone:
                self._note(f"{back.detail}: the maintenance is over")
                await self._cordon(node, policy, lift=True)
                return self._finish(inp, outcome, f"{len(self.moved)} of {len(moved)} pod(s) moved before the "
                                                  "deadline; the node is back and uncordoned")
            await workflow.sleep(timedelta(seconds=rules.poll_s), summary=f"{node}: {back.detail}")
        return self._finish(inp, "node_not_back" if outcome == "moved" else outcome,
                            f"{len(self.moved)} of {len(moved)} pod(s) moved; {node} not back within "
                            f"{rules.back_s:g}s of the deadline: its cordon ({MAINTENANCE_TAINT}) is left for a person")

    def _finish(self, inp: MaintenanceInput, outcome: Outcome, explanation: str) -> MaintenanceOutcome:
        self._note(f"closed: {outcome}: {explanation}")
        if inp.search_attributes and workflow.info().typed_search_attributes.get(search.PHASE) is not None:
            workflow.upsert_search_attributes([search.PHASE.value_set("Closed"), search.OUTCOME.value_set(outcome)])
        return MaintenanceOutcome(node=self.notice.node, outcome=outcome, explanation=explanation,
                                  deadline=self.notice.deadline,
                                  moved=list(self.moved), timeline=list(self.timeline))
