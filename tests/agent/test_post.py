"""Poster against a stub ingest server: retries on 5xx and network errors, never on 4xx."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.agent.fakes import IngestStub
from workers.agent.post import BATCH, Poster


@pytest_asyncio.fixture
async def posters() -> AsyncIterator[Callable[..., Poster]]:
    """Makes posters with a test clock, and closes them after the test whatever happened."""
    made: list[Poster] = []

    def make(url: str, **kwargs: Any) -> Poster:
        kwargs.setdefault("clock", Clock())
        made.append(Poster(url, **kwargs))
        return made[-1]

    yield make
    for poster in made:
        await poster.close()


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def events(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"specversion": "1.0", "id": str(i), "source": "podmedic-agent/n", "type": "t", "data": {}}
            for i in range(start, start + n)]


async def test_503_is_retried_after_the_backoff(posters: Callable[..., Poster], ingest: IngestStub) -> None:
    clock = Clock()
    poster = posters(ingest.url, token="s3cret", clock=clock, backoff_s=(2.0, 60.0))
    ingest.answer((503, {"error": "Temporal unreachable"}))
    poster.enqueue(events(3))
    assert await poster.flush() == 0
    assert poster.pending == 3 and 1.6 <= poster.retry_in <= 2.4
    assert await poster.flush() == 0 and len(ingest.requests) == 1  # still backing off: no request
    clock.now += 2.5
    assert await poster.flush() == 3
    assert poster.pending == 0 and poster.accepted == 3
    [(_, first), (headers, body)] = ingest.requests
    assert first == body == events(3)  # the same events, in order
    assert headers["Authorization"] == "Bearer s3cret" and headers["Content-Type"] == BATCH


async def test_backoff_doubles_up_to_the_ceiling(posters: Callable[..., Poster], ingest: IngestStub) -> None:
    clock = Clock()
    poster = posters(ingest.url, clock=clock, backoff_s=(1.0, 4.0))
    ingest.answer(500, 502, 503, 504)
    poster.enqueue(events(1))
    delays = []
    for _ in range(4):
        await poster.flush()
        delays.append(poster.retry_in)
        clock.now += poster.retry_in + 0.01
    for delay, expected in zip(delays, [1, 2, 4, 4], strict=True):
        assert 0.8 * expected <= delay <= min(1.2 * expected, 4.0)
    assert await poster.flush() == 1


@pytest.mark.parametrize("status", [400, 401, 415])
async def test_client_errors_are_logged_and_not_retried(
    posters: Callable[..., Poster], ingest: IngestStub, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    poster = posters(ingest.url, token="t", clock=clock)
    reason = {"error": "malformed input", "problems": [{"where": "[0].data.health", "what": "bad"}]}
    ingest.answer((status, reason))
    poster.enqueue(events(2))
    assert await poster.flush() == 0
    assert poster.pending == 0 and poster.rejected == 2 and poster.retry_in == 0
    clock.now += 3600
    await poster.flush()
    assert len(ingest.requests) == 1
    [line] = [m for m in caplog.messages if "refused" in m]
    assert f"with {status}" in line and "[0].data.health" in line and "not retried" in line
    assert ("PODMEDIC_INGEST_TOKEN" in line) == (status == 401)
    # The next events go out normally.
    poster.enqueue(events(1, start=5))
    assert await poster.flush() == 1


async def test_unreachable_ingest_keeps_events(posters: Callable[..., Poster]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    clock = Clock()
    poster = posters(f"http://127.0.0.1:{port}", clock=clock, timeout_s=2)
    poster.enqueue(events(4))
    assert await poster.flush() == 0
    assert poster.pending == 4 and poster.retry_in > 0


async def test_full_spool_drops_the_oldest(
    posters: Callable[..., Poster], ingest: IngestStub, caplog: pytest.LogCaptureFixture
) -> None:
    poster = posters(ingest.url, spool_max=5, clock=Clock())
    poster.enqueue(events(3))
    poster.enqueue(events(5, start=3))
    assert poster.pending == 5 and poster.dropped == 3
    assert any("spool full (5 events): dropped the 3 oldest" in m for m in caplog.messages)
    await poster.flush()
    assert [e["id"] for e in ingest.events] == ["3", "4", "5", "6", "7"]


async def test_batches_and_413_halves_them(posters: Callable[..., Poster], ingest: IngestStub) -> None:
    poster = posters(ingest.url, batch_max=4, clock=Clock())
    ingest.answer(413)
    poster.enqueue(events(9))
    assert await poster.flush() == 9
    sizes = [len(body) for _, body in ingest.requests]
    assert sizes == [4, 2, 2, 2, 2, 1]  # refused 4, then halves
    assert [e["id"] for e in ingest.events[4:]] == [str(i) for i in range(9)]


async def test_token_file_is_reread(posters: Callable[..., Poster], ingest: IngestStub, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    poster = posters(ingest.url, token="from-env", token_file=token, clock=Clock())
    poster.enqueue(events(1))
    await poster.flush()
    token.write_text("rotated")
    poster.enqueue(events(1))
    await poster.flush()
    assert [h["Authorization"] for h, _ in ingest.requests] == ["Bearer first", "Bearer rotated"]
