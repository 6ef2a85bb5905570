"""The ``podmedic_incidents_open`` gauge: open incidents by kind, driver and phase, and
``podmedic_incidents_oldest_age_seconds``: how long the oldest of each has been open.

The truth is in Temporal, not in any one process: incidents outlive workers, and several
workers share them. So the worker counts them from visibility (the ``PodmedicDriver`` and
``PodmedicPhase`` search attributes of running incident workflows) every
``open_incidents_interval_s`` and the gauge reports the last count. Every worker reports
the same fleet-wide figure; aggregate with ``max``, not ``sum`` (docs/observability.md).
The age is counted from the incident's start: an upper bound of its time in the phase, close
for the phases alerts watch (approval is asked minutes after opening, the taint of a device
waiting for its vendor is minutes old when the wait begins).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import Counter
from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from temporalio.client import Client

from podmedic.domain import search
from podmedic.domain import workflow_names as names

log = logging.getLogger("podmedic.telemetry.open_incidents")

KINDS = {names.DEVICE_INCIDENT: "device", names.NODE_INCIDENT: "node"}
QUERY = f"ExecutionStatus = 'Running' AND WorkflowType IN ({', '.join(repr(t) for t in KINDS)})"
Key = tuple[str, str, str]


class OpenIncidents:
    """Counts running incidents from visibility; an observable gauge reports the last count."""

    def __init__(self, client: Client, meter: Meter, interval_s: float = 15.0,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        self.client = client
        self.interval_s = interval_s
        self.counts: dict[Key, int] = {}
        self.opened: dict[Key, dt.datetime | None] = {}
        self.now = now
        self.refreshed = 0
        meter.create_observable_gauge(
            "podmedic_incidents_open", callbacks=[self._observe],
            description="Running incidents by kind (device, node), driver and phase, from Temporal visibility.")
        meter.create_observable_gauge(
            "podmedic_incidents_oldest_age_seconds", callbacks=[self._observe_age], unit="s",
            description="Seconds since the oldest running incident of each kind, driver and phase opened "
                        "(0: none).")

    async def refresh(self) -> dict[Key, int]:
        """Count now; a combination that had incidents and has none any more reports 0."""
        found: Counter[Key] = Counter()
        opened: dict[Key, dt.datetime] = {}
        async for execution in self.client.list_workflows(QUERY, page_size=1000):
            attributes = execution.typed_search_attributes
            kind = KINDS.get(execution.workflow_type, execution.workflow_type)
            driver = attributes.get(search.DRIVER) or ""
            phase = attributes.get(search.PHASE) or ("Open" if kind == "node" else "Opened")
            key = (kind, driver, phase)
            found[key] += 1
            if key not in opened or execution.start_time < opened[key]:
                opened[key] = execution.start_time
        self.counts = {**dict.fromkeys(self.counts, 0), **found}
        self.opened = {**dict.fromkeys(self.opened), **opened}
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

    def ages(self) -> dict[Key, float]:
        """Seconds since the oldest incident of each combination opened, as of now (0: none open)."""
        now = self.now()
        return {key: max(0.0, (now - start).total_seconds()) if start else 0.0 for key, start in self.opened.items()}

    def _observe_age(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(age, {"kind": kind, "driver": driver, "phase": phase})
                for (kind, driver, phase), age in self.ages().items()]

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, {"kind": kind, "driver": driver, "phase": phase})
                for (kind, driver, phase), n in self.counts.items()]
