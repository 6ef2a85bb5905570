"""podmedic's data converter writes what the contrib pydantic converter writes, and builds one type
adapter per type per process, however many workflow runs (each with its own converter) read it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from temporalio.contrib.pydantic import pydantic_data_converter

from podmedic.domain.models import PodRef
from podmedic.domain.steps import RecoveryResult
from podmedic.temporal import converter
from podmedic.temporal.converter import PodmedicPayloadConverter, podmedic_data_converter

POD = PodRef(namespace="train", name="llama-0", uid="u-1", node="node-0001", containers=["trainer"])
RESULT = RecoveryResult(verified=True, action="in_place_restart", pod=POD, same_node=True,
                        devices=["gpu-0"], detail="restarted")


def test_same_bytes_as_the_contrib_converter_and_each_reads_the_other() -> None:
    values: list[Any] = [RESULT, [POD, POD], {"at": datetime(2026, 11, 24, tzinfo=UTC)}, 7, None, "text"]
    ours = podmedic_data_converter.payload_converter.to_payloads(values)
    theirs = pydantic_data_converter.payload_converter.to_payloads(values)
    assert [(p.metadata, p.data) for p in ours] == [(p.metadata, p.data) for p in theirs]
    hints = [RecoveryResult, list[PodRef], dict[str, datetime], int, type(None), str]
    back = pydantic_data_converter.payload_converter.from_payloads(ours, hints)
    assert back == podmedic_data_converter.payload_converter.from_payloads(theirs, hints)
    assert back[0] == RESULT and back[1] == [POD, POD]


def test_converters_of_many_workflow_runs_share_one_adapter_per_type() -> None:
    payload = podmedic_data_converter.payload_converter.to_payloads([RESULT])
    PodmedicPayloadConverter().from_payloads(payload, [RecoveryResult])  # the adapter exists from here on
    before = converter._cached_adapter.cache_info()
    for _ in range(20):  # the SDK builds a converter per workflow run
        assert PodmedicPayloadConverter().from_payloads(payload, [RecoveryResult]) == [RESULT]
    after = converter._cached_adapter.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 20


def test_an_unhashable_hint_still_converts() -> None:
    hint: Any = Annotated[int, {"unit": "steps"}]  # the dict makes the hint unhashable
    payload = podmedic_data_converter.payload_converter.to_payloads([5])
    assert PodmedicPayloadConverter().from_payloads(payload, [hint]) == [5]
