"""The podmedic.workload helper's pieces, one function at a time."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from podmedic.workload import (
    AnnotationResponder,
    ApiServer,
    CheckpointServer,
    read_annotations,
    restart_exit_code,
    restart_requested,
)
from podmedic.workload.protocol import parse_annotations
from podmedic_sim.proxy import split_pod_target
from podmedic_sim.workload_http import answer_mode


def test_downward_api_file(tmp_path: Path) -> None:
    path = tmp_path / "annotations"
    path.write_text('podmedic.io/checkpoint-request="device/a#1"\nnote="say \\"hi\\"\\n"\n\n')
    assert read_annotations(path) == {"podmedic.io/checkpoint-request": "device/a#1", "note": 'say "hi"\n'}
    assert read_annotations(tmp_path / "missing") == {}
    with pytest.raises(ValueError, match="line 1"):
        parse_annotations("no-equals-sign")


def test_restart_convention() -> None:
    assert restart_exit_code({}) == 85
    assert restart_exit_code({"podmedic.io/restart-exit-code": "42"}) == 42
    with pytest.raises(ValueError, match=r"podmedic\.io/restart-exit-code: '300'"):
        restart_exit_code({"podmedic.io/restart-exit-code": "300"})
    assert restart_requested({"podmedic.io/restart-request": "r1"}) == "r1"
    assert restart_requested({"podmedic.io/restart-request": "r1"}, handled="r1") is None


def _post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_http_endpoint_saves_once_per_request() -> None:
    calls: list[str] = []

    def save(request_id: str) -> tuple[str, str]:
        calls.append(request_id)
        if request_id == "bad":
            raise OSError("disk full")
        return f"step-{len(calls)}", f"s3://b/{len(calls)}"

    server = CheckpointServer(save, port=0, host="127.0.0.1").start()
    url = f"http://127.0.0.1:{server.port}/podmedic/checkpoint"
    try:
        first = _post(url, {"request_id": "r1"})
        assert first == (200, {"request_id": "r1", "checkpoint_id": "step-1", "location": "s3://b/1"})
        assert _post(url, {"request_id": "r1"}) == first and calls == ["r1"]
        assert _post(url, {"request_id": "bad"}) == (500, {"request_id": "bad", "error": "save failed: disk full"})
        assert _post(url, {})[0] == 400
        assert _post(url.replace("/checkpoint", "/other"), {"request_id": "r1"})[0] == 404
    finally:
        server.close()


class _FakeApi(ApiServer):
    """Records patches instead of calling an API server (unit test of the responder alone)."""

    def __init__(self, notes: dict[str, str]) -> None:
        super().__init__("http://unused")
        self.notes = notes
        self.patches: list[dict[str, str | None]] = []

    def pod_annotations(self, namespace: str, name: str) -> dict[str, str]:
        return dict(self.notes)

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        self.patches.append(annotations)
        self.notes.update({k: v for k, v in annotations.items() if v is not None})


def test_annotation_responder_answers_each_request_once() -> None:
    api = _FakeApi({"podmedic.io/checkpoint-request": "r1"})
    responder = AnnotationResponder(lambda rid: (f"id-{rid}", f"loc-{rid}"), api, "ns", "pod")
    assert responder.poll_once() == "r1"
    assert api.patches == [{"podmedic.io/checkpoint-ack": "r1", "podmedic.io/checkpoint-id": "id-r1",
                            "podmedic.io/checkpoint-location": "loc-r1", "podmedic.io/checkpoint-error": None}]
    assert responder.poll_once() is None


def test_annotation_responder_reports_a_failed_save() -> None:
    def save(rid: str) -> tuple[str, str]:
        raise RuntimeError("no space")

    api = _FakeApi({"podmedic.io/checkpoint-request": "r2"})
    AnnotationResponder(save, api, "ns", "pod").poll_once()
    assert api.patches == [{"podmedic.io/checkpoint-ack": "r2",
                            "podmedic.io/checkpoint-error": "save failed: no space"}]


def test_sim_answer_modes_and_proxy_targets() -> None:
    assert answer_mode({}, 0.3) == ("ok", 0.3)
    assert answer_mode({"sim.podmedic.io/checkpoint-answer": "slow:2.5"}, 0.3) == ("ok", 2.5)
    assert answer_mode({"sim.podmedic.io/checkpoint-answer": "never"}, 0.3) == ("never", 0.3)
    assert answer_mode({"sim.podmedic.io/checkpoint-answer": "slow:x"}, 0.3) == ("fail", 0.0)
    assert split_pod_target("p") == ("http", "p", None)
    assert split_pod_target("p:8471") == ("http", "p", "8471")
    assert split_pod_target("https:p:443") == ("https", "p", "443")
