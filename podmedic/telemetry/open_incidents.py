"""The ``podmedic_incidents_open`` gauge: open incidents by kind, driver and phase.

The truth is in Temporal, not in any one process: incidents outlive workers, and several
workers share them. So the worker counts them from visibility (the ``PodmedicDriver`` and
``PodmedicPhase`` search attributes of running incident workflows) every
``open_incidents_interval_s`` and the gauge reports the last count. Every worker reports
the same fleet-wide figure; aggregate with ``max``, not ``sum`` (docs/observability.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from temporalio.client import Client

from podmedic.domain import search

log = logging.getLogger("podmedic.telemetry.open_incidents")

QUERY = "ExecutionStatus = 'Running' AND WorkflowType IN ('DeviceIncident', 'NodeIncident')"
KINDS = {"DeviceIncident": "device", "NodeIncident": "node"}
Key = tuple[str, str, str]


class OpenIncidents:
    """Counts running incidents from visibility; an observable gauge reports the last count."""

    def __init__(self, client: Client, meter: Meter, interval_s: float = 15.0) -> None:
        self.client = client
        self.interval_s = interval_s
        self.counts: dict[Key, int] = {}
        self.refreshed = 0
        meter.create_observable_gauge(
            "podmedic_incidents_open", callbacks=[self._observe],
            description="Running incidents by kind (device, node), driver and phase, from Temporal visibility.")

    async def refresh(self) -> dict[Key, int]:
        """Count now; a combination that had incidents and has none any more reports 0."""
        found: Counter[Key] = Counter()
        async for execution in self.client.list_workflows(QUERY, page_size=1000):
            attributes = execution.typed_search_attributes
            kind = KINDS.get(execution.workflow_type, execution.workflow_type)
            driver = attributes.get(search.DRIVER) or ""
            phase = attributes.get(search.PHASE) or ("Open" if kind == "node" else "Opened")
            found[(kind, driver, phase)] += 1
        self.counts = {**dict.fromkeys(self.counts, 0), **found}
        self.refreshed += 1
        return self.counts

    async def run_forever(self) -> None:
        """Refresh every ``interval_s`` until cancelled; a failed count keeps the last one."""
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # visibility down: the gauge keeps its last value
                log.warning("counting open incidents failed: %s", exc)
            await asyncio.sleep(self.interval_s)

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, {"kind": kind, "driver": driver, "phase": phase})
                for (kind, driver, phase), n in self.counts.items()]
