"""Did the device's last incident already see this failure? Asked only of what a cluster source listed.

A source that lists (a first start, a relist after 410 Gone, a replica that just became the leader)
cannot tell which of the states it lists were delivered before: its cursor is new or gone. A device
still failing whose incident already closed (quarantined, or aborted by an operator) would otherwise
get a second incident for the same failure from every restart or hand-over. So for a listed
failure with no incident open, the device's last run's history is read: if one of its
``health_event`` signals carries the same state (``Deliverer._key``: health, reason, code, pod,
occurrence), that run handled it, and nothing is opened. A watch event is never checked (it is a
change, news by definition), nor is anything while the incident is open (its run drops repeats).
Cost: one describe, plus one history read when the last run is closed, per such failure.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain import workflow_names as names
from podmedic.domain.models import DeviceHealthEvent, Health
from workers.ingest.types import Observation


async def closed_run_that_saw(client: Client, item: Observation,
                              key: Callable[[Observation], tuple[str, Hashable]]) -> str | None:
    """The run id of the device's last incident when it is closed and saw ``item``'s state; else ``None``."""
    if not isinstance(item, DeviceHealthEvent) or item.health is Health.HEALTHY:
        return None
    handle = client.get_workflow_handle(item.device.workflow_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status == WorkflowExecutionStatus.RUNNING:
        return None
    wanted = key(item)
    last = client.get_workflow_handle(item.device.workflow_id, run_id=described.run_id)
    async for event in last.fetch_history_events():
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            continue
        signaled = event.workflow_execution_signaled_event_attributes
        if signaled.signal_name != names.HEALTH_EVENT or len(signaled.input.payloads) != 1:
            continue
        [seen] = await client.data_converter.decode(signaled.input.payloads, [DeviceHealthEvent])
        if isinstance(seen, DeviceHealthEvent) and key(seen) == wanted:
            return described.run_id
    return None
