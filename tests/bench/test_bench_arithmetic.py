"""The benchmarks' pure arithmetic: percentiles, rates, ratios, the figures of a set of incidents."""

from __future__ import annotations

from benchmarks.fleet import Timing
from benchmarks.orchestration import incident_figures, nodes_for
from benchmarks.stats import percentile, rate, ratio, summary


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
    assert nodes_for(7) == 2
