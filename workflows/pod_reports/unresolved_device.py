"""A device health report podmedic cannot tie to one DRA device: reported on the pod, never lost.

The kubelet names devices in pod status by the driver's CDI ID (``podmedic.kube.resource_ids``).
When that ID cannot be resolved to one device of the pod's claim (one CDI ID shared by several
devices, a claim already gone), podmedic cannot know which device to taint. It does not guess:
it tells the pod's owner on the pod (Event ``PodmedicDeviceUnresolved``, annotation
``podmedic.io/problem``) and keeps the record, searchable by namespace, node and phase, for an
operator to act on; other detectors (the node agent, the driver's ResourceSlice taints,
Alertmanager) name the device directly and open its incident.
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain import workflow_names as names
    from podmedic.domain.models import Outcome, UnresolvedDevice
    from workflows.pod_reports.report import report_on_pod


class UnresolvedDeviceOutcome(BaseModel):
    """How the report ended."""

    incident_id: str
    outcome: Outcome
    explanation: str
    reported_on_pod: bool


@workflow.defn(name=names.UNRESOLVED_DEVICE)
class UnresolvedDeviceWorkflow:
    """Reports an unresolvable device health entry on its pod, once."""

    @workflow.run
    async def run(self, report: UnresolvedDevice) -> UnresolvedDeviceOutcome:
        """Explain on the pod and close."""
        pod = f"{report.pod.namespace}/{report.pod.name}"
        said = f": {report.message}" if report.message else ""
        explanation = (f"pod {pod} reports resourceID {report.resource_id!r} ({report.entry}) {report.health.value}"
                       f"{said}, but podmedic cannot tell which device that is ({report.why}). No device was "
                       f"tainted and the pod was not restarted; check the node's devices "
                       f"({report.node or 'node unknown'}).")
        workflow.set_current_details(f"**Reporting** an unresolved device on {pod}: {report.resource_id}")
        explanation, told = await report_on_pod(
            report.pod, "PodmedicDeviceUnresolved", explanation,
            f"unresolved_device: {report.resource_id} {report.health.value}: {report.why}",
            f"explain unresolved device {report.resource_id} on {pod}")
        return UnresolvedDeviceOutcome(incident_id=workflow.info().workflow_id, outcome=Outcome.REPORTED,
                                       explanation=explanation, reported_on_pod=told)
