"""The node incident's side of the fleet guard: ask before cordoning and tainting the node.

Like a device incident's (``workflows/waiting/guard_permit.py``) but without the ``ask_operator`` gate: the
node quarantine has its own approval gate already, so a held quarantine waits (phase
``Throttled``) for room or for a storm to end; a resolution meanwhile drops it. Inert when the
watch's input carries no enabled guard.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.fleet_guard import GuardActivities
    from podmedic.domain.fleet_guard.messages import PermitRelease, PermitRequest
    from podmedic.domain.models import DeviceRef
    from workflows.activity_options import GIVE_BACK
    from workflows.context import NodeContext
    from workflows.waiting.wait import wait_for



async def permit(wf: NodeContext) -> bool:
    """True once the guard lets the quarantine go; False when the node was resolved while held."""
    guard = wf.inp.guard
    if guard is None or not guard.enabled:
        return True
    devices = [DeviceRef.parse(rid) for rid in wf.state.devices]
    # A watch opened by a device plugin's device has no DRA device: the guard counts the node under the
    # resource's domain (nvidia.com/gpu -> nvidia.com), a valid driver name.
    device = devices[0] if devices else DeviceRef(driver=wf.inp.driver.split("/", 1)[0], pool=wf.inp.node,
                                                  device="node")
    request = PermitRequest(incident_id=workflow.info().workflow_id, device=device, node=wf.inp.node,
                            step="node_quarantine", policy=guard, search_attributes=wf.inp.search_attributes,
                            counts=False)
    held = ""
    while True:
        answer = await workflow.execute_activity_method(
            GuardActivities.ask_guard, request, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
            summary=f"ask the fleet guard: quarantine node {wf.inp.node}")
        wf.waits.guard_asked = True
        if answer.granted:
            if held:
                wf.note(f"node_quarantine allowed by the fleet guard: {answer.detail}", "guard")
            return True
        if held != answer.detail:
            held = answer.detail
            wf.note(f"node_quarantine held by the fleet guard ({answer.limit}): {answer.detail}", "guard")
        wf.state.phase = "Throttled"
        wf.state.doing = f"node_quarantine waits for the fleet guard ({answer.limit}): {answer.detail}"
        wf.upsert("Throttled")
        wf.waits.guard_woke = False
        await wait_for(lambda: wf.waits.guard_woke or wf.resolution is not None, at_most_s=guard.retry_s,
                       summary="fleet guard holds the node quarantine")
        if wf.resolution is not None:
            return False


async def release(wf: NodeContext) -> None:
    """Give back the node's permit when the node incident closes."""
    if not wf.waits.guard_asked:
        return
    try:
        await workflow.execute_activity_method(
            GuardActivities.release_guard, PermitRelease(incident_id=workflow.info().workflow_id),
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=GIVE_BACK,
            summary="give back the fleet guard's permit")
    except ActivityError as err:
        wf.note(f"permit not given back (the guard keeps counting it): {err.cause or err}", "guard")
