"""The HTTP front's refusals, served for real, with a Temporal address where nothing listens.

Nothing here needs Temporal up: every refusal is answered before delivery, and the one
request that reaches delivery shows the 503 a sender gets while Temporal is unreachable.
The accepted paths are in tests/e2e_ingest/test_http_ingest.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp.test_utils import TestServer
from temporalio.client import Client

from podmedic.domain.policy_file import load_policy
from podmedic.temporal.converter import podmedic_data_converter
from workers.ingest.delivery import Deliverer
from workers.ingest.http.app import build_app
from workers.ingest.http.auth import AuthConfigError
from workers.ingest.http.cloudevents import BATCH, EVENT_TYPE, STRUCTURED
from workers.ingest.settings import HttpSettings, IngestSettings
from workers.stack.readiness import free_port

pytestmark = pytest.mark.asyncio(loop_scope="session")
TOKEN = "t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def event(i: int = 1) -> dict[str, Any]:
    return {"specversion": "1.0", "id": f"e-{i}", "source": "test", "type": EVENT_TYPE,
            "data": {"driver": "gpu.nvidia.com", "pool": "node-0", "device": "gpu-0", "health": "Unhealthy"}}


@pytest_asyncio.fixture(loop_scope="session")
async def deliverer() -> Deliverer:
    client = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True, data_converter=podmedic_data_converter)
    return Deliverer(client, load_policy(None), "tq-unused")


@pytest_asyncio.fixture(loop_scope="session")
async def front(deliverer: Deliverer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setenv("PODMEDIC_INGEST_TOKEN", TOKEN)
    settings = IngestSettings(http=HttpSettings(max_body_bytes=4096, max_batch=3, deliver_timeout_s=5))
    server = TestServer(build_app(deliverer, settings), host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url(""))
    await server.close()


async def post(url: str, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
    async with aiohttp.ClientSession() as s, s.post(url, data=body, headers={"Content-Type": ctype, **(
            AUTH if headers is None else headers)}) as r:
        return r.status, await r.json(), r.headers


async def test_unauthenticated_requests_get_401_with_a_challenge(front: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        status, body, got = await post(f"{front}/v1/events", json.dumps(event()).encode(), STRUCTURED, headers)
        assert status == 401, body
        assert got["WWW-Authenticate"].startswith("Bearer")
    async with aiohttp.ClientSession() as s, s.get(f"{front}/v1/stats") as r:
        assert r.status == 401


async def test_wrong_content_type_gets_415_naming_the_accepted_ones(front: str) -> None:
    status, body, _ = await post(f"{front}/v1/events", json.dumps(event()).encode(), "text/plain")
    assert status == 415
    assert STRUCTURED in body["accepted"] and BATCH in body["accepted"]
    status, body, _ = await post(f"{front}/v1/events", json.dumps(event()).encode(), "application/json")
    assert status == 415 and "ce-specversion" in body["what"]
    status, body, _ = await post(f"{front}/v1/alertmanager", b"{}", STRUCTURED)
    assert status == 415 and body["accepted"] == ["application/json"]


async def test_oversized_body_and_batch_get_413_saying_the_limit(front: str) -> None:
    big = event()
    big["data"]["message"] = "x" * 5000
    status, body, _ = await post(f"{front}/v1/events", json.dumps(big).encode(), STRUCTURED)
    assert status == 413 and body["limit_bytes"] == 4096
    status, body, _ = await post(f"{front}/v1/events", json.dumps([event(i) for i in range(4)]).encode(), BATCH)
    assert status == 413 and body["limit_events"] == 3


async def test_malformed_event_gets_400_with_where_and_what(front: str) -> None:
    bad = [event(1), event(2)]
    bad[1]["data"]["health"] = "sick"
    status, body, _ = await post(f"{front}/v1/events", json.dumps(bad).encode(), BATCH)
    assert status == 400
    assert [p["where"] for p in body["problems"]] == ["[1].data.health"]
    status, body, _ = await post(f"{front}/v1/alertmanager", b"{not json", "application/json")
    assert status == 400 and body["problems"][0]["where"] == "(body)"


async def test_temporal_unreachable_gets_503_with_retry_after(front: str, deliverer: Deliverer) -> None:
    status, body, headers = await post(f"{front}/v1/events", json.dumps(event()).encode(), STRUCTURED)
    assert status == 503, body
    assert int(headers["Retry-After"]) > 0
    assert deliverer.delivered == 0 and len(deliverer.recent) == 0  # nothing remembered: the retry goes through


async def test_stats_count_refusals_and_healthz_needs_no_token(front: str) -> None:
    await post(f"{front}/v1/events", b"{}", STRUCTURED, {})
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{front}/healthz") as r:
            assert r.status == 200
        async with s.get(f"{front}/v1/stats", headers=AUTH) as r:
            stats = await r.json()
    assert stats["rejected_by_status"]["401"] >= 1
    assert stats["accepted"] == 0 and stats["round_trips"] == 0


async def test_no_token_configured_refuses_to_build(deliverer: Deliverer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODMEDIC_INGEST_TOKEN", raising=False)
    with pytest.raises(AuthConfigError, match="PODMEDIC_INGEST_TOKEN"):
        build_app(deliverer, IngestSettings())
    build_app(deliverer, IngestSettings(http=HttpSettings(allow_unauthenticated=True)))
