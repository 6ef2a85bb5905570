"""A pod's own configuration problem: reported on the pod, never a device incident.

A driver's prepare failure classified ``bad_config`` (the claim's opaque parameters are
wrong, the request is not supported) is not the device's fault: tainting the device or
restarting the pod would not help and would loop. The incident tells the pod's owner what
is wrong, with a Kubernetes Event and an annotation, and closes as ``reported``. Its id is
per pod instance and opened with REJECT_DUPLICATE, so the kubelet's retries cannot reopen it.
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain import workflow_names as names
    from podmedic.domain.models import ConfigProblem, FailureMode, Outcome
    from workflows.pod_reports.report import PROBLEM_ANNOTATION, report_on_pod

__all__ = ["PROBLEM_ANNOTATION", "ConfigIncidentOutcome", "ConfigIncidentWorkflow"]


class ConfigIncidentOutcome(BaseModel):
    """How a configuration incident ended."""

    incident_id: str
    outcome: Outcome
    failure_mode: FailureMode
    explanation: str
    reported_on_pod: bool


@workflow.defn(name=names.CONFIG_INCIDENT)
class ConfigIncidentWorkflow:
    """Reports a bad-config prepare failure on its pod, once."""

    @workflow.run
    async def run(self, problem: ConfigProblem) -> ConfigIncidentOutcome:
        """Explain the problem on the pod and close."""
        pod = f"{problem.pod.namespace}/{problem.pod.name}"
        explanation = (f"pod {pod} cannot start: {problem.driver} refused to prepare its devices because of "
                       f"the pod's configuration ({problem.message}). Not a device fault: podmedic will not "
                       f"taint a device or restart the pod; fix the claim or its parameters.")
        workflow.set_current_details(f"**Reporting** bad configuration on {pod}: {problem.message}")
        explanation, told = await report_on_pod(problem.pod, "PodmedicBadConfig", explanation,
                                                f"bad_config: {problem.message}", f"explain bad configuration on {pod}")
        return ConfigIncidentOutcome(incident_id=workflow.info().workflow_id, outcome=Outcome.REPORTED,
                                     failure_mode=FailureMode.BAD_CONFIG, explanation=explanation,
                                     reported_on_pod=told)
