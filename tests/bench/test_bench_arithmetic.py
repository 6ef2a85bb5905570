"""The benchmarks' pure arithmetic: percentiles, rates, ratios, the figures of a set of incidents."""

from __future__ import annotations

from benchmarks.fleet import Timing
from benchmarks.goodput import duration_for, effective_ratio, interval_h_of
from benchmarks.orchestration import incident_figures, nodes_for, per_node_words, placement
from benchmarks.stats import mean_ci95, percentile, rate, ratio, summary


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0  # unsorted input


def test_summary_rate_and_ratio() -> None:
    assert summary([1.0, 2.0, 3.0, 10.0]) == {"p50": 2.0, "p99": 10.0, "max": 10.0}
    assert rate(500, 20.0) == 25.0
    assert rate(5, 0.0) == 0.0
    assert ratio(20.0, 25.0) == 0.8
    assert ratio(1.0, 0.0) == 0.0


def test_incident_figures_from_timelines() -> None:
    # Two incidents sent at t=100 and t=101; tainted 0.5 s and 2 s later, closed at 104 and 105.
    a = Timing("d/p/a", sent=100.0, tainted=100.5, recovered=101.0, closed=104.0, outcome="recovered_in_place")
    b = Timing("d/p/b", sent=101.0, tainted=103.0, recovered=None, closed=105.0, outcome="failed")
    figures = incident_figures([a, b])
    assert figures["elapsed_s"] == 5.0
    assert figures["incidents_per_s"] == 0.4
    assert figures["event_to_taint_ms"]["p50"] == 500.0
    assert figures["event_to_taint_ms"]["max"] == 2000.0
    assert figures["recovered"] == 1 and figures["event_to_recovered_ms"]["p50"] == 1000.0
    assert figures["all_tainted_s"] == 3.0
    assert figures["outcomes"] == {"recovered_in_place": 1, "failed": 1}


def test_an_unfinished_incident_does_not_count_as_done() -> None:
    open_one = Timing("d/p/c", sent=100.0, outcome="unfinished: TimeoutError")
    figures = incident_figures([open_one, Timing("d/p/d", sent=100.0, tainted=101.0, closed=102.0)])
    assert figures["closed"] == 1 and figures["tainted"] == 1


def test_nodes_for_leaves_room_for_the_warm_up() -> None:
    assert nodes_for(500) * 8 >= 501
    assert nodes_for(7) == 3  # the warm-up's node, 7 on one node, one spare
    assert nodes_for(100, per_node=1) == 102  # the warm-up's node, one per incident, one spare


def test_placement_gives_the_warm_up_a_node_then_per_node_jobs_to_each() -> None:
    assert placement(["warm", "a", "b", "c"], 2) == {"warm": "node-0000", "a": "node-0001", "b": "node-0001",
                                                     "c": "node-0002"}
    assert set(placement([f"j{i}" for i in range(5)], 1).values()) == {f"node-000{i}" for i in range(5)}
    assert max(placement([f"j{i}" for i in range(101)], 1).values()) < f"node-{nodes_for(100, 1):04d}"


def test_per_node_words_say_when_the_nodes_are_node_incidents() -> None:
    # The benchmark policy's node_correlation: 3 devices of one node make a node incident.
    assert per_node_words({"per_node": 1}) == "one failing device per node"
    assert per_node_words({"per_node": 2}) == "2 failing devices per node"
    assert per_node_words({"per_node": 3}) == "3 failing devices per node (node incidents)"
    assert per_node_words({}) == "8 failing devices per node (node incidents)"  # results from before --per-node


def test_the_run_length_follows_from_the_interruption_interval() -> None:
    # 16 interruptions of 32 jobs at one per job every 3 real hours: 1.5 h of each job, which
    # at 60 real seconds to a simulated one is 90 simulated seconds.
    assert duration_for(16, jobs=32, interval_h=3.0, scale=60.0) == 90.0
    assert interval_h_of(16, jobs=32, duration_s=90.0, scale=60.0) == 3.0
    assert interval_h_of(16, jobs=8, duration_s=45.0, scale=60.0) == 0.375  # the old default: 8x Llama 3's rate


def test_effective_training_ratio() -> None:
    # 2 jobs for 10 s at 0.1 s a step could make 200 steps; 150 kept is 75 %.
    assert effective_ratio(150, jobs=2, seconds=10.0, step_s=0.1) == 0.75
    assert effective_ratio(250, jobs=2, seconds=10.0, step_s=0.1) == 1.0  # never above 100 %
    assert effective_ratio(10, jobs=0, seconds=10.0) == 0.0


def test_mean_ci95_matches_a_worked_example() -> None:
    # Worked by hand: mean 5, sample sd sqrt(10/4) = 1.5811, t(4 df) = 2.776 -> 2.776 * 1.5811 / sqrt(5) = 1.963.
    mean, half = mean_ci95([3.0, 4.0, 5.0, 6.0, 7.0])
    assert mean == 5.0 and abs(half - 1.963) < 0.001
    assert mean_ci95([2.0]) == (2.0, 0.0) and mean_ci95([]) == (0.0, 0.0)


def test_storm_threshold_from_the_shipped_storm_rule() -> None:
    # docs/guard.md: a storm is storm.share (30 %) of a driver's devices within storm.window_s (300 s), and at
    # least storm.min_devices (10).
    from benchmarks.storm_guard import crossed_at, threshold
    from podmedic.domain.fleet_guard.policy import GuardPolicy

    shipped = GuardPolicy()
    assert threshold(shipped, 1008) == 303  # 302.4 rounds up: 302 devices are 29.96 %
    assert threshold(shipped, 1000) == 300  # exactly 30 % is a storm
    assert threshold(shipped, 16) == 10  # 30 % would be 5: the floor holds
    # Failures at t = 0, 1, 2, 400, 401: three within 300 s first at t = 2; never four.
    assert crossed_at([401.0, 0.0, 2.0, 1.0, 400.0], 3, 300.0) == 2.0
    assert crossed_at([0.0, 1.0, 400.0, 401.0], 3, 300.0) is None
