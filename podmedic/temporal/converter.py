"""podmedic's data converter: pydantic models as JSON, with one type adapter per type per process.

The SDK builds a new payload converter for every workflow run a worker loads, and
``temporalio.contrib.pydantic`` caches its ``TypeAdapter``s on the converter: every incident
built an adapter for each activity result type anew, a measurable share of the worker's Python
time (docs/BENCHMARKS.md, "What the design rests on"). Here the cache belongs to the process.
The wire format is the contrib converter's (``json/plain``, ``pydantic_core.to_json``),
so a history written with either reads back with the other.
"""

from __future__ import annotations

import functools
from typing import Any

import temporalio.api.common.v1
from pydantic import TypeAdapter
from pydantic_core import to_json
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
)


@functools.lru_cache(maxsize=1024)
def _cached_adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint)


def type_adapter(hint: Any) -> TypeAdapter[Any]:
    """The process's adapter for ``hint`` (an unhashable hint gets a new one each time)."""
    try:
        hash(hint)
    except TypeError:
        return TypeAdapter(hint)
    return _cached_adapter(hint)


class PydanticJSONConverter(EncodingPayloadConverter):
    """``json/plain`` payloads: any value pydantic can dump, read back into the hinted type."""

    @property
    def encoding(self) -> str:
        """See base class."""
        return "json/plain"

    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        """See base class."""
        return temporalio.api.common.v1.Payload(metadata={"encoding": b"json/plain"}, data=to_json(value))

    def from_payload(self, payload: temporalio.api.common.v1.Payload, type_hint: type | None = None) -> Any:
        """See base class."""
        return type_adapter(Any if type_hint is None else type_hint).validate_json(payload.data)


_JSON = PydanticJSONConverter()  # stateless: every workflow's converter shares it


class PodmedicPayloadConverter(CompositePayloadConverter):
    """The SDK's default converters, with JSON through pydantic (``PydanticJSONConverter``)."""

    def __init__(self) -> None:
        """Built once per workflow run by the SDK: cheap, it only arranges the shared converters."""
        super().__init__(*(_JSON if isinstance(c, JSONPlainPayloadConverter) else c
                           for c in DefaultPayloadConverter.default_encoding_payload_converters))


podmedic_data_converter = DataConverter(payload_converter_class=PodmedicPayloadConverter)
"""podmedic's data converter (no codec; ``podmedic.temporal.connect.data_converter`` adds one when configured)."""
