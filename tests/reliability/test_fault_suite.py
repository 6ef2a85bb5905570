"""The fault suite, quick: the real stack as separate processes, every fault kind once.

``python -m benchmarks faults --quick`` run in-process (the children are real processes: dev server,
simulator, vendor desk, worker, ingest). The figures come from the simulator's request ledger,
the vendor desk and Temporal histories, so each assertion can fail on a real duplicate, a lost
event, a retry storm or an incident that never finishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.faults.api_faults import attempt_limits, over_limit
from benchmarks.faults.report import Report
from benchmarks.faults.suite import SuiteOptions, run


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Report]:
    """One quick run of every scenario, shared by the tests of this module."""
    workdir = tmp_path_factory.mktemp("faults")
    found = run(SuiteOptions(quick=True, keep_dir=workdir / "stack"))
    found.write_json(workdir / "faults.json", "pytest tests/reliability")
    yield found


def _row(report: Report, scenario: str) -> Any:
    return next(r for r in report.results if r.scenario == scenario)


@pytest.mark.timeout(900)
def test_quick_suite_has_no_duplicate_no_loss_and_every_incident_completed(report: Report) -> None:
    assert {r.scenario for r in report.results} == {
        "worker SIGKILL", "dev server restart", "ingest SIGKILL", "ingest leader SIGKILL", "API faults",
        "403/422 fail fast"}
    for r in report.results:
        assert r.incidents > 0 and r.faults_injected > 0, (r.scenario, r.notes)
        assert r.duplicated_effects == 0, (r.scenario, r.details)
        assert r.lost_events == 0, (r.scenario, r.notes)
        assert r.completed == r.incidents, (r.scenario, r.notes, r.details)


def test_worker_kills_leave_one_rule_one_reschedule_one_ticket(report: Report) -> None:
    row = _row(report, "worker SIGKILL")
    assert row.faults_injected == len(row.details) >= 3
    for d in row.details:
        assert (d["taint_rules_created"], d["recoveries"], d["tickets"]) == (1, 1, 1), d


def test_a_killed_ingest_leader_is_replaced_and_no_device_gets_a_second_incident(report: Report) -> None:
    row = _row(report, "ingest leader SIGKILL")
    assert [d["incident_runs"] for d in row.details] == [1] * row.incidents, row.details
    assert any("the standby led" in note for note in row.notes), row.notes


def test_403_and_422_fail_the_taint_step_at_once_with_the_status_named(report: Report) -> None:
    row = _row(report, "403/422 fail fast")
    assert [d["outcome"] for d in row.details] == ["failed", "failed"], row.details
    for d, (status, kind) in zip(row.details, [(403, "Forbidden"), (422, "InvalidObject")], strict=True):
        assert d["attempts"].get("taint_device") == 1, d["attempts"]
        assert d["taint_create_requests"] == 1, d  # counted by the simulator: no retry storm
        assert str(status) in d["explanation"] and kind in d["explanation"], d["explanation"]
        assert d["taint_rules_created"] == 0 and d["tickets"] == 0, d


def test_api_fault_retries_stay_within_the_drivers_max_attempts(report: Report) -> None:
    row = _row(report, "API faults")
    assert not over_limit(row.details), row.details
    retried = [n for d in row.details for n in d["attempts"].values() if n > 1]
    assert retried, "the injected errors never made an activity retry: the faults did not bite"
    assert attempt_limits()["taint_device"] == 10  # the limits read from the suite policy, not guessed
    assert any("answered 429/500/503" in note for note in row.notes), row.notes


def test_report_writes_the_table(report: Report, tmp_path: Path) -> None:
    report.write_markdown(tmp_path / "RELIABILITY.md", "pytest")
    text = (tmp_path / "RELIABILITY.md").read_text()
    assert "| scenario | faults injected | incidents | duplicated effects | lost events |" in text
    assert all(r.scenario in text for r in report.results)
