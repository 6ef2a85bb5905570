"""The worker's options: workflows unsandboxed unless asked, and the same options for the bare baseline."""

from __future__ import annotations

import gc

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from podmedic.settings import SettingsError
from workers.cli.main import parse
from workers.worker.collector import GC_THRESHOLDS, tune_gc
from workers.worker.evictions import EvictionCountingRunner
from workers.worker.options import Capacity, worker_options


def test_workflows_run_unsandboxed_unless_asked_with_evictions_counted() -> None:
    plain, sandboxed = worker_options()["workflow_runner"], worker_options(sandboxed=True)["workflow_runner"]
    assert isinstance(plain, EvictionCountingRunner) and isinstance(plain.inner, UnsandboxedWorkflowRunner)
    assert isinstance(sandboxed, EvictionCountingRunner) and isinstance(sandboxed.inner, SandboxedWorkflowRunner)


def test_sandbox_flag_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODMEDIC_WORKFLOW_SANDBOX", raising=False)
    assert parse(["worker"]).sandbox is False
    assert parse(["worker", "--sandbox"]).sandbox is True
    monkeypatch.setenv("PODMEDIC_WORKFLOW_SANDBOX", "1")
    assert parse(["worker"]).sandbox is True
    monkeypatch.setenv("PODMEDIC_WORKFLOW_SANDBOX", "maybe")  # refused, not read as off
    with pytest.raises(SettingsError, match="PODMEDIC_WORKFLOW_SANDBOX='maybe'"):
        parse(["worker"])


def test_gc_tuning_raises_the_thresholds_and_freezes_what_is_alive() -> None:
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > before[0]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_capacity_flags_env_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODMEDIC_MAX_CACHED_WORKFLOWS", raising=False)
    monkeypatch.delenv("PODMEDIC_MAX_CONCURRENT_ACTIVITIES", raising=False)
    args = parse(["worker"])
    # The settings' defaults are the worker's own.
    assert Capacity(args.max_cached_workflows, args.max_concurrent_activities) == Capacity()
    options = worker_options(capacity=Capacity(300, 40))
    assert (options["max_cached_workflows"], options["max_concurrent_activities"]) == (300, 40)
    args = parse(["worker", "--max-cached-workflows", "800", "--max-concurrent-activities", "90"])
    assert (args.max_cached_workflows, args.max_concurrent_activities) == (800, 90)
    monkeypatch.setenv("PODMEDIC_MAX_CACHED_WORKFLOWS", "900")
    assert parse(["worker"]).max_cached_workflows == 900
    for name in ("PODMEDIC_MAX_CACHED_WORKFLOWS", "PODMEDIC_MAX_CONCURRENT_ACTIVITIES"):
        monkeypatch.setenv(name, "0")  # a worker that holds nothing is refused
        with pytest.raises(SettingsError, match=name):
            parse(["worker"])
        monkeypatch.delenv(name)
