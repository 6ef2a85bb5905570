"""CloudEvents parsing: the data contract, and refusals that say where and why."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from podmedic.domain.maintenance import MaintenanceNotice
from podmedic.domain.models import DeviceRef, Health
from workers.ingest.errors import EventError
from workers.ingest.http.cloudevents import EVENT_TYPE, parse_batch, parse_binary, parse_structured


def event(i: int = 1, **data: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": "gpu.nvidia.com", "pool": "node-0001", "device": "gpu-3",
                            "health": "Unhealthy", "code": 79, **data}
    return {"specversion": "1.0", "id": f"e-{i}", "source": "podmedic-agent/node-0001", "type": EVENT_TYPE,
            "data": {k: v for k, v in body.items() if v is not None}}


def raw(obj: object) -> bytes:
    return json.dumps(obj).encode()


def problems(body: bytes, batch: bool = False) -> list[tuple[str, str]]:
    with pytest.raises(EventError) as caught:
        parse_batch(body) if batch else parse_structured(body)
    return caught.value.problems


def test_structured_event_becomes_a_health_event() -> None:
    ce = event(node="node-0001", reason="XidError", message="XID 79: fallen off the bus",
               pod={"namespace": "ml", "name": "train-0", "uid": "u1"}, metrics={"temperature_c": 71})
    ce["time"] = "2025-03-01T10:00:00Z"
    ce["traceparent"] = "00-abc-def-01"  # an extension attribute: allowed by the spec, ignored
    got = parse_structured(raw(ce))
    assert got.device == DeviceRef(driver="gpu.nvidia.com", pool="node-0001", device="gpu-3")
    assert (got.health, got.code, got.node, got.reason) == (Health.UNHEALTHY, 79, "node-0001", "XidError")
    assert got.event_id == "ce/podmedic-agent/node-0001/e-1"
    assert got.source == "http"
    assert got.observed_at == dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC)  # no observed_at: the CE time
    assert got.pod is not None and got.pod.name == "train-0"
    assert got.metrics == {"temperature_c": 71.0}


def test_observed_at_wins_over_time_and_arrival_is_the_last_resort() -> None:
    ce = event(observed_at="2025-03-01T09:59:00+01:00")
    ce["time"] = "2025-03-01T10:00:00Z"
    assert parse_structured(raw(ce)).observed_at == dt.datetime(2025, 3, 1, 8, 59, tzinfo=dt.UTC)
    before = dt.datetime.now(dt.UTC)
    assert parse_structured(raw(event())).observed_at >= before


@pytest.mark.parametrize(("mutate", "where", "says"), [
    (lambda e: e.pop("id"), "id", "Field required"),
    (lambda e: e.update(id=""), "id", "at least 1 character"),
    (lambda e: e.update(source=""), "source", "at least 1 character"),
    (lambda e: e.update(specversion="0.3"), "specversion", "'1.0'"),
    (lambda e: e.update(type="com.example.other"), "type", EVENT_TYPE),
    (lambda e: e.update(time="yesterday"), "time", "RFC 3339"),
    (lambda e: e.update(time="2025-03-01T10:00:00"), "time", "offset"),
    (lambda e: e.update(datacontenttype="text/plain"), "datacontenttype", "application/json"),
    (lambda e: e.pop("data"), "data", "Field required"),
    (lambda e: e["data"].update(health="Broken"), "data.health", "Healthy"),
    (lambda e: e["data"].update(code="79"), "data.code", "integer"),
    (lambda e: e["data"].update(code=79.5), "data.code", "integer"),
    (lambda e: e["data"].pop("driver"), "data.driver", "Field required"),
    (lambda e: e["data"].update(devise="gpu-3"), "data.devise", "Extra inputs"),
    (lambda e: e["data"].update(metrics={"temperature_c": "hot"}), "data.metrics.temperature_c", "number"),
    (lambda e: e["data"].update(pod={"namespace": "ml"}), "data.pod.name", "Field required"),
])
def test_each_kind_of_bad_event_is_located(mutate: Any, where: str, says: str) -> None:
    ce = event()
    mutate(ce)
    found = problems(raw(ce))
    assert any(w == where and says in what for w, what in found), found


def test_bad_json_names_line_and_column() -> None:
    [(where, what)] = problems(b'{"specversion": "1.0",\n  "id": }')
    assert where == "(body)"
    assert "line 2 column" in what


def test_a_batch_names_the_bad_event_by_index() -> None:
    batch = [event(i) for i in range(20)]
    batch[12]["data"]["health"] = "sick"
    found = problems(raw(batch), batch=True)
    assert [w for w, _ in found] == ["[12].data.health"]


def test_a_batch_is_all_events_in_order() -> None:
    got = parse_batch(raw([event(i, device=f"gpu-{i}") for i in range(5)]))
    assert [e.device.device for e in got] == [f"gpu-{i}" for i in range(5)]
    assert len({e.event_id for e in got}) == 5


@pytest.mark.parametrize(("body", "says"), [(b"[]", "empty batch"), (b"{}", "valid array"), (b"[1]", "")])
def test_batches_that_are_not_lists_of_events_are_refused(body: bytes, says: str) -> None:
    found = problems(body, batch=True)
    assert any(says in what for _, what in found), found


def test_a_thousand_bad_events_give_a_bounded_answer() -> None:
    found = problems(raw([{"specversion": "1.0"}] * 1000), batch=True)
    assert len(found) <= 21
    assert found[-1][0] == "(more)"


def test_binary_mode_reads_attributes_from_headers() -> None:
    headers = {"ce-specversion": "1.0", "ce-id": "b-1", "ce-source": "dcgm/node-7", "ce-type": EVENT_TYPE,
               "ce-time": "2025-03-01T10:00:00Z", "Content-Type": "application/json"}
    got = parse_binary(headers, raw(event()["data"]))
    assert got.event_id == "ce/dcgm/node-7/b-1"
    assert got.observed_at == dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC)


def test_binary_mode_locates_header_and_body_problems() -> None:
    headers = {"ce-specversion": "1.0", "ce-source": "dcgm/node-7", "ce-type": EVENT_TYPE}
    with pytest.raises(EventError) as caught:
        parse_binary(headers, raw({**event()["data"], "health": 3}))
    assert {w for w, _ in caught.value.problems} == {"header ce-id", "(body).health"}


def maintenance(deadline: str | None, i: int = 1) -> dict[str, Any]:
    """podmedic's maintenance event (docs/detection.md): the node and the deadline, RFC 3339 or null."""
    return {"specversion": "1.0", "id": f"m-{i}", "source": "bridge/azure-scheduled-events",
            "type": "io.podmedic.node.maintenance.v1", "data": {"node": "node-0001", "deadline": deadline}}


def test_a_maintenance_event_is_the_nodes_notice_and_the_same_deadline_is_the_same_notice() -> None:
    got = parse_structured(raw(maintenance("2026-12-01T12:00:00Z")))
    assert isinstance(got, MaintenanceNotice), got
    assert (got.node, got.deadline) == ("node-0001", dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC))
    assert got.source == "CloudEvent from bridge/azure-scheduled-events" and not got.problem
    # 1796126400 is 2026-12-01T12:00:00Z (date -u -d 2026-12-01T12:00:00Z +%s): GKE's label of that time is
    # the same notice, whichever source tells it first.
    assert got.event_id == "maintenance/node-0001@1796126400"
    again = parse_structured(raw(maintenance("2026-12-01T13:00:00+01:00", i=2)))
    assert isinstance(again, MaintenanceNotice) and again.event_id == got.event_id


def test_a_maintenance_event_with_a_null_deadline_withdraws_and_one_without_is_refused() -> None:
    [gone] = parse_batch(raw([maintenance(None, i=7)]))
    assert isinstance(gone, MaintenanceNotice) and gone.deadline is None and not gone.problem
    assert gone.event_id == "maintenance/node-0001@withdrawn/ce/bridge/azure-scheduled-events/m-7"
    silent = maintenance(None)
    del silent["data"]["deadline"]
    assert problems(raw(silent)) == [("data.deadline", "Field required")]
    assert problems(raw(maintenance("2026-12-01T12:00:00")))[0][0] == "data.deadline"
    health_data = maintenance("2026-12-01T12:00:00Z")
    health_data["data"] = event()["data"]
    assert {where for where, _ in problems(raw(health_data))} >= {"data.node", "data.deadline", "data.driver"}


def test_an_unknown_type_is_refused_at_type_naming_the_types_podmedic_reads() -> None:
    [(where, why)] = problems(raw({**event(), "type": "com.example.other"}))
    assert where == "type" and EVENT_TYPE in why and "io.podmedic.node.maintenance.v1" in why


def test_a_binary_mode_maintenance_event() -> None:
    headers = {"ce-specversion": "1.0", "ce-id": "b-1", "ce-source": "bridge/ec2-events",
               "ce-type": "io.podmedic.node.maintenance.v1"}
    got = parse_binary(headers, raw({"node": "node-0002", "deadline": "2026-12-01T12:00:00Z"}))
    assert isinstance(got, MaintenanceNotice) and got.node == "node-0002" and got.deadline is not None
    with pytest.raises(EventError) as caught:
        parse_binary(headers, raw({"node": "node-0002"}))
    assert caught.value.problems == [("(body).deadline", "Field required")]
