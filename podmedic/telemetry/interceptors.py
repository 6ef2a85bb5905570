"""Temporal interceptors: incident attributes on every span, and metrics of every activity.

Both are client interceptors that also implement ``temporalio.worker.Interceptor``, so a
worker built on the client inherits them (tracing outermost, then metrics, whose span
attributes then land on the tracing interceptor's ``RunActivity`` span).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import temporalio.activity
import temporalio.client
import temporalio.worker
from opentelemetry import trace
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.exceptions import CancelledError

from podmedic.telemetry.metrics import metrics

# Span attribute names (docs/observability.md).
INCIDENT = "podmedic.incident_id"
DRIVER = "podmedic.driver"
DEVICE = "podmedic.device"
POOL = "podmedic.pool"
NODE = "podmedic.node"


def incident_attributes(workflow_id: str) -> dict[str, str]:
    """What an incident's workflow id says: ``device/<driver>/<pool>/<device>`` or ``node/<node>``."""
    kind, _, rest = workflow_id.partition("/")
    if kind == "device":
        parts = rest.split("/")
        if len(parts) == 3 and all(parts):
            return {INCIDENT: workflow_id, DRIVER: parts[0], POOL: parts[1], DEVICE: rest}
    if kind == "node" and rest:
        return {INCIDENT: workflow_id, NODE: rest}
    return {}


def node_of(value: Any) -> str | None:
    """The node an activity input or result names (``node``, ``pod.node``, ``watch.node``), if any."""
    for holder in (value, getattr(value, "pod", None), getattr(value, "watch", None)):
        node = getattr(holder, "node", None)
        if isinstance(node, str) and node:
            return node
    return None


class PodmedicTracingInterceptor(TracingInterceptor):
    """Temporal's ``TracingInterceptor`` whose workflow spans also carry the incident's driver and device.

    The attributes are added where the SDK creates workflow spans, outside the sandbox, from
    the workflow id alone, so workflow code stays untouched and replay-safe.
    """

    def _completed_workflow_span(self, params: Any) -> Any:
        attributes = dict(params.attributes or {})
        attributes.update(incident_attributes(str(attributes.get("temporalWorkflowID", ""))))
        return super()._completed_workflow_span(dataclasses.replace(params, attributes=attributes))


class ActivityMetricsInterceptor(temporalio.client.Interceptor, temporalio.worker.Interceptor):
    """Counts every activity by kind, driver and outcome, its retries and its duration."""

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        """Wrap activity execution."""
        return _ActivityMetrics(next)


class _ActivityMetrics(temporalio.worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        info = temporalio.activity.info()
        attributes = incident_attributes(info.workflow_id or "")
        node = node_of(input.args[0]) if input.args else None
        span = trace.get_current_span()
        span.set_attributes({**attributes, **({NODE: node} if node else {})})
        labels = {"kind": info.activity_type, "driver": attributes.get(DRIVER, "")}
        instruments = metrics()
        if info.attempt > 1:
            instruments.action_retries.add(1, labels)
        started = time.monotonic()
        outcome = "failed"
        try:
            result = await self.next.execute_activity(input)
            outcome = "succeeded"
            found = node_of(result)
            if found and not node:
                span.set_attribute(NODE, found)
            return result
        except (CancelledError, asyncio.CancelledError):
            outcome = "cancelled"
            raise
        finally:
            instruments.actions.add(1, {**labels, "outcome": outcome})
            instruments.action_duration.record(time.monotonic() - started, {"kind": info.activity_type})
