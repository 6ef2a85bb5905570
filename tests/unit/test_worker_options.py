"""The worker's options: workflows unsandboxed unless asked, and the same options for the bare baseline."""

from __future__ import annotations

import gc

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from podmedic.cli.main import parse
from podmedic.settings import SettingsError
from workers.worker import GC_THRESHOLDS, MAX_CACHED_WORKFLOWS, tune_gc, worker_options


def test_workflows_run_unsandboxed_unless_asked() -> None:
    assert isinstance(worker_options()["workflow_runner"], UnsandboxedWorkflowRunner)
    assert isinstance(worker_options(sandboxed=True)["workflow_runner"], SandboxedWorkflowRunner)


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


def test_cached_workflows_flag_env_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODMEDIC_MAX_CACHED_WORKFLOWS", raising=False)
    assert parse(["worker"]).max_cached_workflows == MAX_CACHED_WORKFLOWS  # the setting's default is the worker's
    assert worker_options()["max_cached_workflows"] == MAX_CACHED_WORKFLOWS
    assert worker_options(max_cached_workflows=300)["max_cached_workflows"] == 300
    assert parse(["worker", "--max-cached-workflows", "800"]).max_cached_workflows == 800
    monkeypatch.setenv("PODMEDIC_MAX_CACHED_WORKFLOWS", "900")
    assert parse(["worker"]).max_cached_workflows == 900
    monkeypatch.setenv("PODMEDIC_MAX_CACHED_WORKFLOWS", "0")  # a worker that caches nothing is refused
    with pytest.raises(SettingsError, match="PODMEDIC_MAX_CACHED_WORKFLOWS"):
        parse(["worker"])
