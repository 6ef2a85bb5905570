"""Announced maintenance, the pure parts: reading GKE's node label, the moment to act, and the ingest source's
diff of nodes.

The label's shape is GKE's: ``cloud.google.com/scheduled-maintenance-time`` holds the maintenance start as
Unix seconds while it is scheduled and not active ("Monitor maintenance events"; the GKE docs' node
affinity examples compare it with ``Gt`` against an epoch time), and is gone otherwise.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from podmedic.domain.maintenance import GKE_LABEL, act_at, notice_of, request_id
from podmedic.kube.gateway import KubeGateway
from workers.ingest.sources.maintenance import MaintenanceSource

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
AT = 1_796_126_400  # 2026-12-01T12:00:00Z (date -u -d 2026-12-01T12:00:00Z +%s)


def node(value: str | None, version: str = "1") -> dict[str, Any]:
    labels = {GKE_LABEL: value} if value is not None else {}
    return {"metadata": {"name": "gpu-a", "labels": labels, "resourceVersion": version}}


def test_the_label_is_read_as_the_deadline_in_unix_seconds() -> None:
    notice = notice_of(node(str(AT)), False, NOW)
    assert notice is not None and notice.deadline == dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    assert notice.workflow_id == "maintenance/gpu-a" and not notice.problem
    assert notice.source == f"node label {GKE_LABEL}"


def test_a_value_that_is_no_time_is_a_notice_that_says_what_was_wrong_and_where() -> None:
    notice = notice_of(node("tomorrow"), False, NOW)
    assert notice is not None and notice.deadline is None
    assert notice.problem == f"node gpu-a label {GKE_LABEL}='tomorrow': not a time in Unix seconds"


def test_no_label_is_news_only_where_one_was_announced() -> None:
    assert notice_of(node(None), False, NOW) is None
    gone = notice_of(node(None, "9"), True, NOW)
    assert gone is not None and gone.deadline is None and not gone.problem and gone.event_id.endswith("withdrawn/9")


def test_the_moment_to_act_leaves_the_save_and_the_move_before_the_deadline() -> None:
    deadline = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    assert act_at(deadline, 60, 120) == dt.datetime(2026, 12, 1, 11, 57, tzinfo=dt.UTC)
    first = notice_of(node(str(AT)), False, NOW)
    again = notice_of(node(str(AT), "2"), True, NOW + dt.timedelta(hours=1))
    later = notice_of(node(str(AT + 60)), True, NOW)
    assert first and again and later
    assert request_id(first) == request_id(again) != request_id(later)


def test_the_source_tells_each_change_once_and_remembers_across_a_restart() -> None:
    source = MaintenanceSource(KubeGateway.__new__(KubeGateway))
    first = source.change("ADDED", node(str(AT)))
    assert [o.deadline for o in first.observations] == [dt.datetime.fromtimestamp(AT, dt.UTC)]  # type: ignore[union-attr]
    first.apply()
    assert source.change("MODIFIED", node(str(AT), "2")).observations == []  # same notice: no news
    moved = source.change("MODIFIED", node(str(AT + 600), "3"))
    assert len(moved.observations) == 1
    moved.apply()
    saved = source.memory()
    restarted = MaintenanceSource(KubeGateway.__new__(KubeGateway))
    restarted.restore(saved)
    assert restarted.change("ADDED", node(str(AT + 600), "3")).observations == []
    gone = restarted.change("MODIFIED", node(None, "4"))
    assert [(o.deadline, o.problem) for o in gone.observations] == [(None, "")]  # type: ignore[union-attr]
    gone.apply()
    assert restarted.memory() == {"announced": {}}
    assert restarted.change("MODIFIED", node(None, "5")).observations == []


def test_a_node_deleted_while_announced_ends_its_notice() -> None:
    source = MaintenanceSource(KubeGateway.__new__(KubeGateway))
    source.change("ADDED", node(str(AT))).apply()
    assert len(source.change("DELETED", node(str(AT))).observations) == 1
    assert len(source.missing([]).observations) == 1
