"""Generated CloudEvents against the contract: what is valid is accepted and carried unchanged, and what
breaks one rule is refused naming exactly where.

The contract is the CloudEvents 1.0 spec (JSON format: ``specversion`` "1.0", ``id`` and ``source``
non-empty, ``time`` RFC 3339, extension attributes accepted and ignored) and podmedic's published data
schema (docs/detection.md, "HTTP"): ``type`` ``io.podmedic.device.health.v1``; ``data`` with the DRA
device (driver a DNS subdomain, device a DNS label: the ResourceSlice rules), ``health`` one of
``Healthy|Unhealthy|Unknown``, ``code`` an integer, ``observed_at`` RFC 3339 with an offset (default
the event's ``time``); ``event_id`` ``ce/<source>/<id>``. A parser refusing everything, or accepting
everything, fails here (``tests/fuzz/test_cloudevents_property.py`` only proves it never crashes).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.ingest.errors import EventError
from workers.ingest.http.cloudevents import parse_batch, parse_structured

label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?", fullmatch=True)
subdomain = st.builds(".".join, st.lists(label, min_size=1, max_size=3)).filter(lambda s: len(s) <= 253)
moments = st.datetimes(min_value=dt.datetime(2020, 1, 1), max_value=dt.datetime(2035, 1, 1),
                       timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=2)),
                                                  dt.timezone(dt.timedelta(hours=-7, minutes=-30))]))


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {"driver": draw(subdomain), "pool": draw(subdomain), "device": draw(label),
                            "health": draw(st.sampled_from(["Healthy", "Unhealthy", "Unknown"]))}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "node": subdomain, "reason": st.text(max_size=30), "code": st.integers(0, 2**31),
        "message": st.text(max_size=60), "observed_at": moments.map(dt.datetime.isoformat),
        "metrics": st.dictionaries(st.text(min_size=1, max_size=10),
                                   st.floats(allow_nan=False, allow_infinity=False), max_size=3)}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            data[key] = draw(strategy)
    ce: dict[str, Any] = {"specversion": "1.0", "id": draw(st.text(min_size=1, max_size=40)),
                          "source": draw(st.text(min_size=1, max_size=40)), "type": "io.podmedic.device.health.v1",
                          "data": data}
    if draw(st.booleans()):
        ce["time"] = draw(moments).isoformat()
    if draw(st.booleans()):
        ce["datacontenttype"] = "application/json"
    if draw(st.booleans()):  # an extension attribute (spec: lowercase alphanumeric name), ignored
        ce[draw(st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True).filter(lambda k: k not in ce))] = "x"
    return ce


def _expect_carried(ce: dict[str, Any], event: Any) -> None:
    data = ce["data"]
    assert (event.device.driver, event.device.pool, event.device.device) == (data["driver"], data["pool"],
                                                                             data["device"])
    assert event.health.value == data["health"]
    assert event.code == data.get("code") and event.message == data.get("message", "")
    assert event.node == data.get("node") and event.reason == data.get("reason", "")
    assert event.metrics == data.get("metrics", {})
    assert event.event_id == f"ce/{ce['source']}/{ce['id']}"
    told = data.get("observed_at") or ce.get("time")
    if told is not None:
        assert event.observed_at == dt.datetime.fromisoformat(told)


@settings(max_examples=300, deadline=None)
@given(ce=valid_events())
def test_a_valid_event_is_accepted_and_carried_unchanged(ce: dict[str, Any]) -> None:
    _expect_carried(ce, parse_structured(json.dumps(ce).encode()))


@settings(max_examples=100, deadline=None)
@given(batch=st.lists(valid_events(), min_size=1, max_size=4))
def test_a_valid_batch_is_accepted_in_order(batch: list[dict[str, Any]]) -> None:
    events = parse_batch(json.dumps(batch).encode())
    assert len(events) == len(batch)
    for ce, event in zip(batch, events, strict=True):
        _expect_carried(ce, event)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(ce: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = ce
        for key in parents:
            target = target[key]
        target[last] = value
    return apply


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def apply(ce: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = ce
        for key in parents:
            target = target[key]
        target.pop(last, None)
    return apply


# One broken rule each, and where the refusal must point (the rule's place in the event).
BREAKS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "specversion 0.3": (_set("specversion", "0.3"), "specversion"),
    "no id": (_drop("id"), "id"),
    "empty id": (_set("id", ""), "id"),
    "empty source": (_set("source", ""), "source"),
    "another type": (_set("type", "com.example.other"), "type"),
    "time not RFC 3339": (_set("time", "yesterday"), "time"),
    "time without an offset": (_set("time", "2026-11-22T10:00:00"), "time"),
    "content type text": (_set("datacontenttype", "text/plain"), "datacontenttype"),
    "no data": (_drop("data"), "data"),
    "health lower case": (_set("data.health", "unhealthy"), "data.health"),
    "device not a DNS label": (_set("data.device", "GPU_0"), "data.device"),
    "driver not a DNS subdomain": (_set("data.driver", "Nvidia GPUs"), "data.driver"),
    "no driver": (_drop("data.driver"), "data.driver"),
    "code as a string": (_set("data.code", "79"), "data.code"),
    "a misspelt data field": (_set("data.helth", "Unhealthy"), "data.helth"),
    "observed_at without an offset": (_set("data.observed_at", "2026-11-22T10:00:00"), "data.observed_at"),
}


def _locations(refusal: EventError) -> list[str]:
    return [where for where, _ in refusal.problems]


@settings(max_examples=300, deadline=None)
@given(ce=valid_events(), name=st.sampled_from(sorted(BREAKS)))
def test_one_broken_rule_is_refused_at_its_place(ce: dict[str, Any], name: str) -> None:
    broken = copy.deepcopy(ce)
    apply, where = BREAKS[name]
    apply(broken)
    try:
        parse_structured(json.dumps(broken).encode())
    except EventError as refusal:
        assert where in _locations(refusal), (name, refusal.problems)
        return
    raise AssertionError(f"{name}: accepted {broken}")


@settings(max_examples=150, deadline=None)
@given(batch=st.lists(valid_events(), min_size=1, max_size=4), name=st.sampled_from(sorted(BREAKS)),
       data=st.data())
def test_one_broken_event_of_a_batch_is_named_by_its_index(batch: list[dict[str, Any]], name: str,
                                                          data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(batch) - 1))
    apply, where = BREAKS[name]
    apply(batch[index])
    try:
        parse_batch(json.dumps(batch).encode())
    except EventError as refusal:
        assert f"[{index}].{where}" in _locations(refusal), (name, refusal.problems)
        return
    raise AssertionError(f"{name} at [{index}]: accepted")
