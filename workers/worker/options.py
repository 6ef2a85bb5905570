"""The options every podmedic worker runs with, and the bare baseline's worker too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from workers.worker.evictions import EvictionCountingRunner


def workflow_runner(sandboxed: bool) -> WorkflowRunner:
    """How workflow code runs: in the SDK's sandbox, or directly in the worker's interpreter.

    Unsandboxed by default: podmedic runs only its own workflows, whose determinism CI proves
    in the sandbox (``tests/workflow`` run every workflow there, ``tests/replay`` replays recorded
    histories there). The sandbox re-imports the workflow modules for every incident and compiles
    code for every payload it converts: a large share of the worker's CPU in ``python -m benchmarks
    orchestration`` (py-spy, docs/BENCHMARKS.md), for a check CI already makes. Either way its evictions are counted
    for the collector (``workers/worker/evictions.py``).
    """
    return EvictionCountingRunner(SandboxedWorkflowRunner() if sandboxed else UnsandboxedWorkflowRunner())


@dataclass(frozen=True)
class Capacity:
    """How much one worker holds at once (``podmedic worker --max-cached-workflows``,
    ``--max-concurrent-activities``)."""

    cached_workflows: int = 1500
    """Workflows kept in memory (SDK default 1,000): room for a 1,000-device storm's incidents, their
    node incidents and the guard. An incident evicted from the cache is replayed from its whole
    history on its next task, trading CPU for memory; a cached incident costs about 0.2 MiB of
    Python objects and the SDK's state (docs/SCALING.md)."""

    concurrent_activities: int = 1000
    """Activities running at once (SDK default 100). Most of an incident's activities wait, not work:
    for a checkpoint's answer, a replacement's readiness, a workload's progress; a slot is held while
    waiting. In a hall-wide storm too few slots, each held by a poll of a minute, let activities start
    a few a second while thousands queued (docs/BENCHMARKS.md). Waiting costs a slot a coroutine; the API
    calls themselves share the QPS budget (``podmedic/kube/throttle.py``)."""


DEFAULT_CAPACITY = Capacity()


def worker_options(*, sandboxed: bool = False, capacity: Capacity = DEFAULT_CAPACITY) -> dict[str, Any]:
    """The Worker options podmedic runs with; the bare baseline (``benchmarks/bare.py``) takes the same."""
    return {
        "max_concurrent_activities": capacity.concurrent_activities,
        # Twenty workflow-task polls, nearly all on the task queue that holds new incidents' first
        # tasks (the fence runs in them); running incidents' next tasks come from the sticky queue
        # (SDK docs: maximum x ratio polls at most on the task queue, at least one on the sticky
        # queue). In a storm the SDK's 5 polls left new incidents' first tasks waiting for a poll
        # while the worker's event loop sat mostly idle; more sticky polls or autoscaled polls
        # fenced slower, likely because running incidents' recoveries then take the CPU the
        # fences need. The storm runs that chose these numbers are in docs/BENCHMARKS.md.
        "workflow_task_poller_behavior": PollerBehaviorSimpleMaximum(maximum=20),
        "nonsticky_to_sticky_poll_ratio": 2.0,
        "max_cached_workflows": capacity.cached_workflows,
        "workflow_runner": workflow_runner(sandboxed),
    }
