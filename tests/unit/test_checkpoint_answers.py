"""Judging what an HTTP endpoint or a kubelet answered, and the job's aggregate."""

from __future__ import annotations

import json

import pytest

from activities.checkpoints.answers import Answer, http_answer, kubelet_answer, merge
from podmedic.domain.steps import CheckpointAggregate, CheckpointReport, CheckpointStatus, PodCheckpoint

OK = json.dumps({"request_id": "r1", "checkpoint_id": "step-9", "location": "s3://b/step-9"})


def test_http_saved_pending_and_failures() -> None:
    assert http_answer(200, OK, "r1") == Answer("saved", "step-9", ["s3://b/step-9"])
    assert http_answer(200, json.dumps({"checkpoint_id": "c"}), "r1") == Answer("saved", "c", [])
    assert http_answer(202, "", "r1").state == "pending"
    assert http_answer(500, '{"error": "disk full"}', "r1").reason == "endpoint answered 500: disk full"
    assert "not JSON" in http_answer(200, "saved!", "r1").reason
    assert "not a JSON object" in http_answer(200, "[1]", "r1").reason
    assert http_answer(200, OK, "r2").reason == "request_id: answer is for 'r1', not 'r2'"
    assert http_answer(200, json.dumps({"checkpoint_id": ""}), "r1").reason.startswith("checkpoint_id:")
    assert http_answer(200, json.dumps({"checkpoint_id": "c", "location": 3}), "r1").reason.startswith("location:")


def test_http_error_text_is_shortened() -> None:
    reason = http_answer(503, "x" * 1000, "r").reason
    assert len(reason) < 260 and reason.endswith("...")


def test_kubelet_answers() -> None:
    tar = "/var/lib/kubelet/checkpoints/checkpoint-p_ns-c-2026-01-01T00:00:00Z.tar"
    assert kubelet_answer(200, json.dumps({"items": [tar]}), "c") == Answer(
        "saved", "checkpoint-p_ns-c-2026-01-01T00:00:00Z", [tar])
    assert kubelet_answer(404, 'container does not exist: "c"\n', "c").reason == (
        'kubelet answered 404 for container c: container does not exist: "c"')
    assert kubelet_answer(200, json.dumps({"items": []}), "c").reason.startswith("items:")
    assert kubelet_answer(200, "{", "c").state == "failed"


def test_merge_containers() -> None:
    a, b = Answer("saved", "a", ["/a.tar"]), Answer("saved", "b", ["/b.tar"])
    assert merge([a, b]) == Answer("saved", "a,b", ["/a.tar", "/b.tar"])
    assert merge([a, Answer("failed", reason="boom")]) == Answer("failed", reason="boom")


def _pod(status: CheckpointStatus) -> PodCheckpoint:
    return PodCheckpoint(pod="p", method="annotation", status=status)


@pytest.mark.parametrize(("statuses", "aggregate", "summary"), [
    ([CheckpointStatus.SAVED] * 3, CheckpointAggregate.COMPLETE, "complete: 3/3 pods"),
    ([CheckpointStatus.SAVED, CheckpointStatus.SAVED, CheckpointStatus.TIMED_OUT], CheckpointAggregate.PARTIAL,
     "partial: 2/3 pods"),
    ([CheckpointStatus.SKIPPED, CheckpointStatus.FAILED], CheckpointAggregate.NONE, "none: 0/2 pods"),
    ([], CheckpointAggregate.NONE, "none: 0/0 pods"),
])
def test_aggregate(statuses: list[CheckpointStatus], aggregate: CheckpointAggregate, summary: str) -> None:
    report = CheckpointReport(results=[_pod(s) for s in statuses])
    assert report.aggregate is aggregate and report.summary == summary
