"""The watch stream's line splitter gives the lines the ``kubernetes`` client's own splitter gives
(kubernetes/watch/watch.py ``iter_resp_lines``, the oracle here), however the bytes are chunked."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest
from kubernetes.watch.watch import iter_resp_lines

from podmedic.kube.watch_lines import stream_lines


class _Resp:
    """What ``iter_resp_lines`` reads: a response whose ``stream`` yields the chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: int | None = None, decode_content: bool = False) -> Iterator[bytes]:
        return iter(self.chunks)


def _chunked(data: bytes, rng: random.Random) -> list[bytes]:
    chunks, at = [], 0
    while at < len(data):
        size = rng.choice([1, 7, 64, 1000, 65536])
        chunks.append(data[at:at + size])
        at += size
    return chunks


def _stream(rng: random.Random, events: int) -> bytes:
    objects = [{"metadata": {"name": f"p-{i}"}, "note": "é" * rng.randrange(300)} for i in range(events)]
    lines = [json.dumps({"type": "MODIFIED", "object": o}, ensure_ascii=False) for o in objects]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("seed", range(20))
def test_the_same_lines_as_the_client_for_any_chunking(seed: int) -> None:
    rng = random.Random(seed)
    chunks = _chunked(_stream(rng, rng.randrange(1, 200)), rng)
    ours = [line.decode() for line in stream_lines(chunks)]
    assert ours == [line for line in iter_resp_lines(_Resp(chunks)) if line]  # type: ignore[no-untyped-call]
    assert all(json.loads(line)["type"] == "MODIFIED" for line in ours)


def test_a_chunk_of_many_lines_a_line_over_many_chunks_and_a_broken_last_line() -> None:
    chunks = [b'{"a":1}\n{"b":2}\n\n{"c":', b"3", b'}\n{"d":4}\n{"broken', b'":']
    assert list(stream_lines(chunks)) == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']
    # The client drops the broken last line too: a stream cut mid-line carries no event there.
    theirs = [line for line in iter_resp_lines(_Resp(chunks)) if line]  # type: ignore[no-untyped-call]
    assert theirs == ['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}']
