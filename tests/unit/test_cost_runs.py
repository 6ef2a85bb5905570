"""``python -m benchmarks cost --runs R``: the figures are one whole run, the one with the median ratio."""

from __future__ import annotations

from typing import Any

from benchmarks.cost import cost_table, median_run, runs_line


def _run(ratio: float, worker_ms: float) -> dict[str, Any]:
    return {"worker_cpu_ratio_to_bare": ratio, "worker_cpu_ms_per_incident": worker_ms,
            "bare_worker_cpu_ms_per_workflow": round(worker_ms / ratio, 1), "load_1m": 1.0}


def test_the_median_run_is_kept_whole_with_every_run_beside_it() -> None:
    runs = [_run(1.7, 85.0), _run(1.38, 67.0), _run(1.52, 76.0)]
    chosen = median_run(runs)
    # Its own figures, not a mix of runs: the worker CPU is the 1.52 run's.
    assert chosen["worker_cpu_ratio_to_bare"] == 1.52 and chosen["worker_cpu_ms_per_incident"] == 76.0
    assert [r["worker_cpu_ratio_to_bare"] for r in chosen["runs"]] == [1.7, 1.38, 1.52]  # in the order they ran
    assert runs_line(chosen) == "3 runs, worker CPU ratio to bare 1.7, 1.38, 1.52: the figures are the median " \
                                "run's (1.52)"


def test_an_even_count_takes_the_lower_middle_and_one_run_says_nothing_of_runs() -> None:
    assert median_run([_run(2.0, 90.0), _run(1.4, 70.0)])["worker_cpu_ratio_to_bare"] == 1.4
    assert median_run([_run(1.6, 80.0)])["worker_cpu_ratio_to_bare"] == 1.6
    assert runs_line(median_run([_run(1.6, 80.0)])) == ""


def test_the_table_says_which_run_it_is() -> None:
    base = {"incidents": 200, "activities_per_incident": 11, "server": "tuned", "api_requests_per_incident": 11.3,
            "worker_cpu_ratio_to_bare_above_idle": 1.5, "worker_idle_cpu_ms_per_s": 6.7, "pods_watched": 201,
            "worker_cpu_ms_per_incident_above_idle": 50.0, "history_events_per_incident": 72.0,
            "bare_history_events_per_workflow": 71.0, "server_cpu_ms_per_incident": 89.5,
            "server_cpu_ms_per_bare_workflow": 63.5, "simulator_cpu_ms_per_incident": 27.5,
            "bench_cpu_ms_per_incident": 2.0, "api_requests_by_kind": {},
            "worker_full_collections": {"count": 3, "ms_per_workflow": 0.9},
            "bare_worker_full_collections": {"count": 1, "ms_per_workflow": 0.2}}
    table = cost_table(median_run([{**base, **_run(r, 80.0)} for r in (1.9, 1.5, 1.6)]))
    assert "3 runs, worker CPU ratio to bare 1.9, 1.5, 1.6: the figures are the median run's (1.6)" in table
    assert "3: 0.9 (1: 0.2)" in table
