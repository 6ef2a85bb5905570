"""How many workflows this process's workers have evicted from their caches: when a full collection pays.

An evicted workflow is left as a reference cycle (``workers/worker/collector.py`` says why), and only
a full collection frees it; nothing else a worker holds needs one. So the collector sweeps after
evictions, not on a bare clock: a worker with nothing evicted (idle, or holding its open
incidents in cache) walks its whole heap for nothing. The count comes from the workflow runner:
``EvictionCountingRunner`` wraps the SDK's runner and counts each activation that removes a run
from the cache (the SDK's ``remove_from_cache`` job, which every eviction, a completed run's
included, goes through).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import temporalio.converter
import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner


class Evictions:
    """A running count of evicted workflow runs (an activation thread adds, the collector reads)."""

    def __init__(self) -> None:
        self.count = 0

    def total(self) -> int:
        """Evictions so far."""
        return self.count

    def saw(self, act: WorkflowActivation) -> None:
        """Count ``act`` if it evicts its run."""
        if any(job.HasField("remove_from_cache") for job in act.jobs):
            self.count += 1  # a count lost to a race only delays a sweep to the next eviction


EVICTIONS = Evictions()
"""This process's count (one per worker process: podmedic's, and the bare baseline's)."""


class EvictionCountingRunner(WorkflowRunner):
    """``inner``, with every eviction of a workflow it runs counted in ``evictions``."""

    def __init__(self, inner: WorkflowRunner, evictions: Evictions = EVICTIONS) -> None:
        self.inner = inner
        self.evictions = evictions

    def prepare_workflow(self, defn: Any) -> None:
        """See base class. The definition is passed through untouched: ``WorkflowRunner`` types it with the
        SDK's private ``workflow._Definition``, which this need not name."""
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        """See base class."""
        return _CountedInstance(self.inner.create_instance(det), self.evictions)

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        """See base class."""
        self.inner.set_worker_level_failure_exception_types(types)


class _CountedInstance(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, evictions: Evictions) -> None:
        self.inner = inner
        self.evictions = evictions

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self.inner.activate(act)
        self.evictions.saw(act)
        return completion

    # ``command_info`` is the SDK's CommandInfo, which temporalio.worker does not export: typed Any here so
    # that no private module is imported.
    def get_serialization_context(self, command_info: Any
                                  ) -> temporalio.converter.SerializationContext | None:
        return self.inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        return self.inner.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self.inner.get_info()

    def get_thread_id(self) -> int | None:
        return self.inner.get_thread_id()
