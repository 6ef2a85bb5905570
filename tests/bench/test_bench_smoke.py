"""``python -m benchmarks orchestration`` and ``single`` end to end with a handful of incidents.

Not a timed test: it keeps the commands from rotting (a stack that no longer starts, an
outcome that no longer says recovered, a timeline step renamed) and checks that each
figure was measured, not what it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cli import main


def test_orchestration_with_three_incidents_in_two_rounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "orch.json"
    assert main(["orchestration", "--incidents", "3", "--rounds", "2", "--servers", "tuned", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    run = results["servers"]["tuned"]
    assert results["per_node"] == 1 and run["nodes"] == 3  # independent incidents: a node each
    # Each round measured both halves; the headline ratio is their median, between the two.
    rounds = run["rounds"]
    assert len(rounds) == 2 and all(r["bare_workflows_per_s"] > 0 and r["incidents_per_s"] > 0 for r in rounds)
    assert run["ratio_min"] <= run["ratio_to_bare"] <= run["ratio_max"]
    assert run["ratio_to_bare"] == pytest.approx(sum(r["ratio_to_bare"] for r in rounds) / 2, abs=0.01)
    assert run["podmedic"]["outcomes"] == {"recovered_in_place": 3}, run["podmedic"]
    assert run["activities_per_incident"] >= 5
    for key in ("incidents_per_s", "bare_workflows_per_s", "ratio_to_bare", "p50_ms_event_to_taint",
                "p99_ms_event_to_taint"):
        assert results[key] > 0, key
    assert results["p50_ms_event_to_taint"] <= results["p99_ms_event_to_taint"]
    assert run["podmedic"]["event_to_taint_ms"]["p99"] < run["podmedic"]["event_to_recovered_ms"]["p99"]
    assert "2 rounds, ratio median" in capsys.readouterr().out


def test_orchestration_packed_on_one_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "packed.json"
    assert main(["orchestration", "--incidents", "3", "--per-node", "3", "--rounds", "1", "--servers", "tuned",
                 "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["per_node"] == 3 and results["servers"]["tuned"]["nodes"] == 1
    assert results["servers"]["tuned"]["podmedic"]["closed"] == 3
    assert "3 failing devices per node (node incidents)" in capsys.readouterr().out


def test_per_node_outside_a_node_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["orchestration", "--per-node", "9"])
    assert "'9' is not a whole number from 1 to 8" in capsys.readouterr().err


def test_single_with_two_incidents(tmp_path: Path) -> None:
    out = tmp_path / "single.json"
    assert main(["single", "--incidents", "2", "--servers", "tuned", "--json", str(out)]) == 0
    run = json.loads(out.read_text())["servers"]["tuned"]
    assert run["outcomes"] == {"recovered_in_place": 2}
    assert 0 < run["event_to_taint_ms"]["p50"] < run["event_to_recovered_ms"]["p50"]
    assert run["bare_1_activity_ms"]["p50"] > 0


def test_cost_counts_each_process_and_each_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cost.json"
    assert main(["cost", "--incidents", "3", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["closed"] == 3 and r["activities_per_incident"] >= 5
    # The healed device's anti-flap wait (close.anti_flap_s) is a timer; the bare workflows run as many.
    assert r["timers_per_incident"] >= 1
    # The kinds add up to the total, and an in-place restart makes at least its fence and its restart.
    assert sum(r["api_requests_by_kind"].values()) == pytest.approx(r["api_requests_per_incident"], abs=0.05)
    assert r["api_requests_by_kind"]["create devicetaintrules"] >= 1 and r["api_requests_by_kind"]["patch pods"] >= 1
    # The worker learned every pool's node at its start (podmedic/kube/pool_nodes.py), so no incident lists
    # slices to find a pool's node; the one list an incident makes is the repeat-offender check's read of its
    # device's GPU UUID (activities/history.py), selected by that node and driver.
    slices = {k: v for k, v in r["api_requests_by_kind"].items() if k.startswith("list resourceslices")}
    assert sum(slices.values()) <= 1.0, r
    for key in ("worker_cpu_ms_per_incident", "bare_worker_cpu_ms_per_workflow", "server_cpu_ms_per_incident",
                "history_events_per_incident", "bare_history_events_per_workflow",
                "bare_worker_cpu_ms_per_workflow_alone"):
        assert r[key] > 0, key
    assert r["worker_cpu_ratio_to_bare"] == pytest.approx(
        r["worker_cpu_ms_per_incident"] / r["bare_worker_cpu_ms_per_workflow"], abs=0.01)
    # By thread: the SDK core runs in both workers; only podmedic's watches the API server from its named
    # threads. (Not compared with the process's total: the kernel scales each thread's user/system split
    # on its own, so the threads' sum may differ from the process's by a few ticks either way.)
    threads, bare = r["worker_cpu_ms_per_incident_by_thread"], r["bare_worker_cpu_ms_per_workflow_by_thread"]
    assert threads["tokio-rt-worker"] > 0 and bare["tokio-rt-worker"] > 0, (threads, bare)
    # Listed, not timed: a few incidents' pod-cache work can fall inside one 10 ms tick of the kernel's count.
    assert "pod-cache" in threads and "pod-cache" not in bare, (threads, bare)
    out = capsys.readouterr().out
    assert "Kubernetes API requests per incident" in out and "by thread" in out


def test_storm_with_node_quarantine_counts_the_node_taint(tmp_path: Path) -> None:
    # One node's 8 GPUs fail at once: each device is fenced by a rule of its own before its report
    # reaches the node's watch, and the third report makes the node the incident, which quarantines it.
    out = tmp_path / "storm.json"
    assert main(["storm", "--nodes", "1", "--node-quarantine", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["node_quarantine"] is True and r["nodes_quarantined"] == 1, r
    assert r["tainted"] == r["devices"] == 8, r
    assert r["own_rule"] + r["covered_by_node"] == 8, r
    assert 0 < r["event_to_taint_s"]["p50"] <= r["event_to_taint_s"]["max"]


def test_storm_guard_trips_and_counts_no_execute_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two nodes' 16 GPUs fail for good under the shipped guard: with the warm-up's node a fleet of 24, so a storm
    # is 10 devices (docs/guard.md: 30 % within 300 s, never fewer than 10), which the 16 reach.
    out = tmp_path / "storm-guard.json"
    assert main(["storm-guard", "--nodes", "2", "--observe-s", "3", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["fleet_devices"] == 24 and r["guard_fleet"] == {"gpu.nvidia.com": 24}, r
    assert r["storm_threshold_devices"] == 10, r
    assert r["fleet_incident"] and r["fleet_incident"].startswith("fleet/storm/"), r
    assert r["trip_s_after_threshold"] is not None and r["trip_s_after_threshold"] >= 0, r
    assert r["no_execute_samples"] > 0 and max(r["no_execute_most"].values()) <= r["no_execute_limit"], r
    assert "fleet incident opened" in capsys.readouterr().out
