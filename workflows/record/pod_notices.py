"""Telling the affected pods what the incident did: one Kubernetes Event per step.

Best effort: a notice that cannot be written is noted on the timeline and the incident
goes on (the pod's owner loses a hint; the cluster is not left half-remediated).

The Events are written behind the incident rather than in its path: each notice waits for the
one before it (so a pod's Events keep the order of the steps) but the step after it does not
wait for the notice, so no notice stands between a device failing and its taint. ``drain``
waits for the last one before the incident closes.

A step in ``FOLDED`` (the checkpoint's, always followed by a
recovery or the close) writes no Event of its own: its message leads the next notice to the
same pods, so a pod's owner still reads every step, in order, in one Event fewer. A next notice
to other pods (one pod of several recovered, a replacement) writes the held one first, as it
was; ``drain`` writes one still held. Nothing told is dropped.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.notice import NoticeActivities
    from podmedic.domain.incident import IncidentState, StepNotice
    from podmedic.domain.models import PodKey
    from podmedic.domain.policy_steps import KUBE_REFUSALS
    from workflows.activity_options import BACKGROUND
    from workflows.context import IncidentContext


REASONS = {
    "opened": "PodmedicIncidentOpened",
    "awaiting_approval": "PodmedicAwaitingApproval",
    "checkpointed": "PodmedicCheckpointed",
    "tainted": "PodmedicDeviceTainted",
    "taint_raised": "PodmedicTaintRaised",
    "restarted": "PodmedicRestarted",
    "restart_failed": "PodmedicRestartFailed",
    "rescheduled": "PodmedicRescheduled",
    "reschedule_failed": "PodmedicRescheduleFailed",
    "ticketed": "PodmedicTicketed",
    "closed": "PodmedicIncidentClosed",
}

FOLDED = frozenset({"checkpointed"})


@dataclass
class PodNotices:
    """This run's notices to the pods: the one being written, the one held to ride on the next, and the pods
    a notice found and annotated."""

    writing: asyncio.Task[None] | None = None
    """The last notice told: each one waits for the one before it."""
    held: StepNotice | None = None
    """A ``FOLDED`` step's notice, leading the next notice to the same pods."""
    annotated: set[PodKey] = field(default_factory=set)
    """Pods a notice of this incident found and annotated (a continued run carries them)."""


def affected_pods(state: IncidentState) -> list[PodKey]:
    """The pods the incident is about as they are now: a rescheduled pod's replacement
    stands in for it (recovery results are in the order of the pods found)."""
    now = [r.pod if i < len(state.recovery) and (r := state.recovery[i]).pod is not None else p
           for i, p in enumerate(state.pods)]
    keys = {(p.namespace, p.name, p.uid): PodKey(namespace=p.namespace, name=p.name, uid=p.uid) for p in now}
    return list(keys.values())


async def tell_pods(wf: IncidentContext, step: str, message: str, *, pods: list[PodKey] | None = None,
                    warning: bool = False) -> None:
    """Record ``step`` as an Event on each affected pod (``pods`` overrides which)."""
    targets = affected_pods(wf.state) if pods is None else pods
    if not targets or wf.policy.dry_run:  # dry run: not even an Event on the pod
        return
    notice = StepNotice(incident_id=wf.state.incident_id, run_id=workflow.info().run_id, step=step,
                        reason=REASONS[step], message=message, pods=targets, warning=warning)
    held, wf.notices.held = wf.notices.held, None
    if held is not None and set(held.pods) == set(targets):
        notice = notice.model_copy(update={"message": f"{held.message}; then {message}",
                                           "warning": warning or held.warning})
    elif held is not None:
        _write(wf, held)
    if step in FOLDED:
        wf.notices.held = notice
        return
    _write(wf, notice)


def _write(wf: IncidentContext, notice: StepNotice) -> None:
    """Write ``notice`` behind the ones told before it."""
    wf.notices.writing = asyncio.create_task(_after(wf.notices.writing, wf, notice))


async def drain(wf: IncidentContext) -> None:
    """Write a notice still held, and wait until every notice told so far is written (or given up on)."""
    held, wf.notices.held = wf.notices.held, None
    if held is not None:
        _write(wf, held)
    if wf.notices.writing is not None:
        await wf.notices.writing


async def _after(previous: asyncio.Task[None] | None, wf: IncidentContext, notice: StepNotice) -> None:
    if previous is not None:
        await previous
    await _record(wf, notice)


async def _record(wf: IncidentContext, notice: StepNotice) -> None:
    # Known when the notice is written, not when it was told: the one before it may have annotated the pods.
    notice = notice.model_copy(update={"annotated": [p for p in notice.pods if p in wf.notices.annotated]})
    try:
        result = await workflow.execute_activity_method(
            NoticeActivities.notify_step, notice,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3, maximum_interval=timedelta(seconds=5),
                                     non_retryable_error_types=list(KUBE_REFUSALS)),
            summary=f"pod Event {notice.reason} on {', '.join(p.name for p in notice.pods)}"[:200],
            priority=BACKGROUND,
        )
    except ActivityError as err:
        wf.note("notice", f"{notice.reason} not recorded on the pods: {err.cause or err}")
        return
    recorded = set(result.recorded)
    wf.notices.annotated.update(p for p in notice.pods if p.uid and f"{p.namespace}/{p.name}" in recorded)
    if result.gone:
        wf.note("notice", f"{notice.reason}: pod(s) already gone: {', '.join(result.gone)}")
