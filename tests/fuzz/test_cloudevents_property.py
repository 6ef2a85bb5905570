"""Generated CloudEvents, single and batched, well-formed and not: parsing never fails any other
way than an ``EventError`` naming where and why, and every accepted event is a valid observation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as outcome
from hypothesis import strategies as st

from podmedic.domain.models import DeviceHealthEvent
from tests.fuzzkit import damage, json_values
from workers.ingest.errors import EventError
from workers.ingest.http.cloudevents import parse_batch, parse_structured

ENVELOPE = ("specversion", "id", "source", "type", "time", "datacontenttype", "dataschema", "subject", "data")
times = st.sampled_from(["2026-11-22T10:00:00Z", "2026-11-22T10:00:00.123456+02:00", "2026-11-22T10:00:00",
                         "2026-02-30T00:00:00Z", "yesterday"])
good_times = st.sampled_from(["2026-11-22T10:00:00Z", "2026-11-22T10:00:00.123456+02:00"]) | times
replacements = json_values | times | st.sampled_from(["Unhealthy", "1.0", "", "x" * 300, -1, 2**70])


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {
        "driver": draw(st.sampled_from(["gpu.nvidia.com"] * 6 + ["gpu.amd.com", ""])),
        "pool": draw(st.sampled_from(["node-1"] * 8 + ["n" * 260])),
        "device": draw(st.sampled_from(["gpu-0", "gpu-7"])),
        "health": draw(st.sampled_from(["Healthy", "Unhealthy", "Unhealthy", "Unknown", "Unhealthy", "unhealthy"])),
    }
    optional = {"node": st.sampled_from(["node-1", None]), "reason": st.sampled_from(["XID", ""]),
                "code": st.sampled_from([79, 31, None, 79, 48, "79", 1.5]), "message": st.text(max_size=20),
                "observed_at": good_times, "metrics": st.dictionaries(st.sampled_from(["temperature_c", "x"]),
                                                                 st.floats(allow_nan=False)),
                "pod": st.fixed_dictionaries({"namespace": st.sampled_from(["ml", "ml", ""]), "name": st.just("p")})}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            data[key] = draw(strategy)
    ce: dict[str, Any] = {"specversion": "1.0", "id": draw(st.sampled_from(["e-1", "e-2", "e-3", "e-4", "e-5", ""])),
                          "source": "podmedic-agent/node-1", "type": "io.podmedic.device.health.v1", "data": data}
    if draw(st.booleans()):
        ce["time"] = draw(good_times)
    if draw(st.booleans()):
        ce["datacontenttype"] = draw(st.sampled_from(["application/json", "application/json", "text/plain"]))
    return damage(draw, ce, replacements)


@st.composite
def bodies(draw: st.DrawFn, only: bool | None = None) -> tuple[bool, bytes]:
    batch = draw(st.booleans()) if only is None else only
    value: Any = draw(st.lists(events(), min_size=1, max_size=3)) if batch else draw(events())
    if draw(st.sampled_from([False] * 9 + [True])):  # not even an event
        value = draw(json_values)
    text = json.dumps(value).encode()
    if draw(st.sampled_from([False] * 14 + [True])):
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]  # truncated in transit
    return batch, text


def _check(batch: bool, body: bytes) -> None:
    try:
        parsed = parse_batch(body) if batch else [parse_structured(body)]
    except EventError as refusal:
        outcome("refused")
        assert refusal.problems
        for where, what in refusal.problems:
            root = where.split("]", 1)[-1].lstrip(".") if batch and where.startswith("[") else where
            assert root.startswith(("(body)", "(more)", *ENVELOPE)) or (batch and root == ""), where
            assert what.strip(), where
        return
    outcome(f"accepted {len(parsed)}")
    for event in parsed:
        assert DeviceHealthEvent.model_validate(event.model_dump()) == event
        assert event.observed_at.tzinfo is not None
        assert event.event_id.startswith("ce/") and event.event_id.count("/") >= 2


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=bodies())
def test_generated_cloudevents(case: tuple[bool, bytes]) -> None:
    _check(*case)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_cloudevents_long(batch: bool, data: st.DataObject) -> None:
    """10,000 generated cases for single events and 10,000 for batches (``make fuzz``)."""
    _check(*data.draw(bodies(batch)))
