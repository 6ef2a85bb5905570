"""An incident's search attributes, written at most once per workflow task.

Every search attribute upsert is a history event and a visibility write on the server. An
incident changes its phase several times within one workflow task (opened, fencing,
discovering: one task), and in a storm those writes were a large share of the Temporal server's
CPU (docs/BENCHMARKS.md). The writer keeps the changes of one task and upserts them together
when the workflow next waits, so the visibility store sees the same final values with fewer
writes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate


class SearchAttributeWriter:
    """Upserts changed search attributes, together, when the workflow next yields.

    Call ``start`` first thing in the workflow's run and ``stop`` before it returns (it writes
    what is still pending).
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._values: dict[str, object] = {}
        self._pending: dict[str, SearchAttributeUpdate[Any]] = {}
        self._flusher: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin writing in the background."""
        if self.enabled:
            self._flusher = asyncio.create_task(self._flush_when_pending())

    def set(self, key: SearchAttributeKey[Any], value: object | None) -> None:
        """Set (``None``: unset) ``key``, when its value changes."""
        if not self.enabled or self._values.get(key.name) == value:
            return
        self._values[key.name] = value
        self._pending[key.name] = key.value_unset() if value is None else key.value_set(value)

    def stop(self) -> None:
        """Write what is pending now and stop the background writer."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        self._flush()

    async def _flush_when_pending(self) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self._pending))
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            workflow.upsert_search_attributes(list(self._pending.values()))
            self._pending.clear()
