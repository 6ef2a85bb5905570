"""The JSON of API server answers, parsed and written by pydantic-core's Rust codec.

Every answer the worker reads, and every change its pod cache's watch streams, is JSON text:
in the cost benchmark's worker (py-spy, GIL samples) the standard library's ``json`` took a
large share of the Python time, most of it re-writing each watched pod for the cache. pydantic-core
(already installed with pydantic) parses the same text into the same plain values faster, and
writes it several times faster (docs/BENCHMARKS.md, "What the design rests on").
"""

from __future__ import annotations

from typing import Any

import pydantic_core


def parse(text: str | bytes | bytearray) -> Any:
    """JSON text as dicts, lists and scalars (as ``json.loads``); ``ValueError`` when it is not JSON."""
    return pydantic_core.from_json(text)


def compact(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, keys in their order (as ``json.dumps`` with no spaces)."""
    return pydantic_core.to_json(value)
