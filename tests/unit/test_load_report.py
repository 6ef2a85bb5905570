"""A process's once-a-minute line of what it asked of the API server (podmedic/kube/load_report.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from podmedic.kube.load_report import KubeLoadReport, kube_load_reports
from podmedic.kube.throttle import TokenBucket


def test_a_report_counts_the_requests_since_the_last_and_is_silent_without_any() -> None:
    bucket = TokenBucket(qps=0, burst=1)
    report = KubeLoadReport(bucket)
    for _ in range(7):
        bucket.take()
    bucket.note_refused()
    first = report.line(60)
    assert first is not None and first.startswith("kube client: 7 requests in the last 60s, 7 in all; ")
    assert "at most 7 given out in one second (no limit set)" in first
    assert "1 throttled by the API server (429) and sent again" in first
    assert report.line(60) is None  # nothing sent since
    bucket.take()
    line = report.line(60)
    assert line is not None and line.startswith("kube client: 1 requests in the last 60s, 8 in all")


def test_a_limit_is_named() -> None:
    bucket = TokenBucket(qps=50, burst=100)
    bucket.take()
    assert "(limit 50 QPS, burst 100)" in KubeLoadReport(bucket).totals()


async def test_lines_come_on_the_clock_and_the_totals_at_the_end(caplog: pytest.LogCaptureFixture) -> None:
    bucket = TokenBucket(qps=0, burst=1)
    caplog.set_level(logging.INFO, logger="podmedic.kube.load")
    async with kube_load_reports(bucket, every_s=0.05):
        for _ in range(3):
            bucket.take()
        await asyncio.sleep(0.12)
    lines = [r.getMessage() for r in caplog.records if r.name == "podmedic.kube.load"]
    assert lines[0].startswith("kube client: 3 requests in the last 0.05s, 3 in all")
    assert len(lines) == 2, lines  # one with requests, none for the quiet tick after it, then the totals
    assert lines[-1].startswith("kube client: 3 requests in all; at most 3 given out in one second")
