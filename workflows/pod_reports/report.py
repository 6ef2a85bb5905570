"""Report a problem on a pod and close: what every pod-level incident does, with no device to act on.

A configuration problem (``ConfigIncident``) and a device health report podmedic cannot tie to one
device (``UnresolvedDeviceIncident``) both end the same way: a Kubernetes Event and the
``podmedic.io/problem`` annotation on the pod, the record kept in Temporal, outcome ``reported``.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.notice import NoticeActivities
    from podmedic.domain import search
    from podmedic.domain.models import Outcome, PodKey
    from podmedic.domain.policy_steps import KUBE_REFUSALS
    from podmedic.domain.steps import PodNoticeInput

PROBLEM_ANNOTATION = "podmedic.io/problem"


async def report_on_pod(pod: PodKey, reason: str, explanation: str, problem: str, summary: str) -> tuple[str, bool]:
    """Explain on the pod, then close the incident as ``reported``.

    Args:
        pod: The pod to tell.
        reason: The Event's reason (CamelCase).
        explanation: The Event's message, and the incident's closing explanation.
        problem: The value of the ``podmedic.io/problem`` annotation (cut to 500 characters).
        summary: The activity's summary in the Temporal UI.

    Returns:
        The closing explanation and whether the pod was still there to be told.
    """
    notice = await workflow.execute_activity_method(
        NoticeActivities.notify_pod,
        PodNoticeInput(incident_id=workflow.info().workflow_id, pod=pod, reason=reason, message=explanation,
                       annotations={PROBLEM_ANNOTATION: problem[:500]}),
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=RetryPolicy(maximum_attempts=10, non_retryable_error_types=list(KUBE_REFUSALS)),
        summary=summary,
    )
    if not notice.pod_found:
        explanation += " The pod was already gone; the record stays here."
    if workflow.info().typed_search_attributes.get(search.PHASE) is not None:
        workflow.upsert_search_attributes([search.PHASE.value_set("Closed"),
                                           search.OUTCOME.value_set(Outcome.REPORTED.value)])
    workflow.set_current_details(f"**Closed** — reported: {explanation}")
    return explanation, notice.pod_found
