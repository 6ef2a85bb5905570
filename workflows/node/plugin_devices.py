"""Device-plugin devices in a node incident: no DeviceTaintRule can select them, so the node is the fence.

A pod reports a device plugin's device (an extended resource such as ``nvidia.com/gpu``) Unhealthy.
The kubelet already keeps an Unhealthy device out of the node's allocatable, so no new pod gets it
while it stays Unhealthy; but one flap later it is allocatable again, and the pod holding it keeps it
across container restarts (the device manager allocates per pod, pkg/kubelet/cm/devicemanager). So
the node incident quarantines the node at once, tells the pod's owner on the pod, and lifts only
when the node's allocatable counts every device of those resources again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.notice import NoticeActivities
    from activities.quarantine import QuarantineActivities
    from podmedic.domain.node import PluginCapacityInput
    from podmedic.domain.policy_steps import KUBE_REFUSALS
    from podmedic.domain.steps import PodNoticeInput
    from workflows.pod_reports.report import PROBLEM_ANNOTATION

if TYPE_CHECKING:
    from podmedic.domain.models import PluginDevice
    from workflows.context import NodeContext

_RETRY = RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=30),
                     non_retryable_error_types=list(KUBE_REFUSALS))
_TIMEOUT = timedelta(seconds=60)
REASON = "PodmedicPluginDeviceUnhealthy"


def failed_note(report: PluginDevice) -> str:
    """The timeline line of a failed device-plugin device."""
    pod = f"{report.pod.namespace}/{report.pod.name}"
    return (f"{report.name} (device plugin) {report.health.value} in pod {pod}: no DeviceTaintRule can select a "
            f"device-plugin device, so node {report.node} is the incident")


async def tell_pod(wf: NodeContext, report: PluginDevice) -> None:
    """Explain on the pod (Event + ``podmedic.io/problem``) what failed and what podmedic did."""
    pod = f"{report.pod.namespace}/{report.pod.name}"
    incident = workflow.info().workflow_id
    message = (f"device-plugin device {report.device_id} ({report.resource}) on node {report.node} is "
               f"{report.health.value}. No DeviceTaintRule can select it: {incident} quarantines the node. The "
               f"kubelet keeps the device out of the node's allocatable while it is Unhealthy, but this pod keeps "
               f"it across container restarts: recreate the pod to get a healthy device.")
    notice = await workflow.execute_activity_method(
        NoticeActivities.notify_pod,
        PodNoticeInput(incident_id=incident, pod=report.pod, reason=REASON, message=message,
                       annotations={PROBLEM_ANNOTATION: f"plugin_device: {report.name} {report.health.value}"}),
        start_to_close_timeout=timedelta(seconds=30), retry_policy=_RETRY,
        summary=f"tell pod {pod} its {report.resource} device failed")
    told = "told" if notice.pod_found else "already gone; not told"
    wf.note(f"pod {pod} {told} ({report.name})", "notify")


async def still_unhealthy(wf: NodeContext) -> list[str]:
    """The node's device-plugin resources with devices not healthy now (``<resource>: N of M``), from
    the node's capacity and allocatable; a node that is gone has none."""
    resources = sorted({name.rsplit("/", 1)[0] for name in wf.state.plugin_devices})
    found = await workflow.execute_activity_method(
        QuarantineActivities.node_plugin_capacity, PluginCapacityInput(node=wf.inp.node, resources=resources),
        start_to_close_timeout=_TIMEOUT, retry_policy=_RETRY,
        summary=f"are node {wf.inp.node}'s device-plugin devices healthy?")
    if not found.node_found:
        return []
    out = []
    for resource in resources:
        bad = found.unhealthy(resource)
        if bad is None:
            out.append(f"{resource}: not in the node's capacity (its device plugin is not registered)")
        elif bad > 0:
            out.append(f"{resource}: {bad} of {found.capacity[resource]} not healthy")
    return out
