"""Bad requests against every ingest endpoint: unauthenticated, oversized, truncated, wrongly typed.

One matrix over ``/v1/events``, ``/v1/alertmanager`` and ``/v1/tickets/{id}/resolved``: each
refusal comes before delivery (Temporal is not even reachable here), with the status a sender
can act on and, for a bad body, where the problem is.
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
from workers.ingest.http.cloudevents import EVENT_TYPE, STRUCTURED
from workers.ingest.settings import HttpSettings, IngestSettings
from workers.stack.readiness import free_port

pytestmark = pytest.mark.asyncio(loop_scope="session")
TOKEN = "s3cret-token"
LIMIT = 4096
EVENT: dict[str, Any] = {"specversion": "1.0", "id": "e-1", "source": "test", "type": EVENT_TYPE,
         "data": {"driver": "gpu.nvidia.com", "pool": "node-0", "device": "gpu-0", "health": "Unhealthy"}}
ALERTS = {"version": "4", "status": "firing", "receiver": "podmedic", "groupLabels": {}, "commonLabels": {},
          "commonAnnotations": {}, "externalURL": "http://am", "alerts": [
              {"status": "firing", "labels": {"alertname": "GpuXid", "Hostname": "node-0", "gpu": "0",
                                              "UUID": "GPU-1", "DCGM_FI_DEV_XID_ERRORS": "79"},
               "annotations": {}, "startsAt": "2026-11-22T10:00:00Z"}]}
# endpoint -> (path, content type, a good body, the same body wrongly typed, where that problem is)
ENDPOINTS: dict[str, tuple[str, str, Any, Any, str]] = {
    "events": ("/v1/events", STRUCTURED, EVENT,
               {**EVENT, "data": {**EVENT["data"], "health": 5}}, "data.health"),
    "alertmanager": ("/v1/alertmanager", "application/json", ALERTS, {**ALERTS, "alerts": "all of them"}, "alerts"),
    "ticket-resolved": ("/v1/tickets/VND-0001/resolved", "application/json", {"by": "vendor"}, {"by": 5}, "by"),
}


@pytest_asyncio.fixture(loop_scope="session")
async def front(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setenv("PODMEDIC_INGEST_TOKEN", TOKEN)
    client = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True, data_converter=podmedic_data_converter)
    settings = IngestSettings(http=HttpSettings(max_body_bytes=LIMIT, max_batch=3, deliver_timeout_s=5))
    server = TestServer(build_app(Deliverer(client, load_policy(None), "tq-unused"), settings), host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url(""))
    await server.close()


async def send(url: str, body: bytes, ctype: str, token: str | None = TOKEN) -> tuple[int, str]:
    headers = {"Content-Type": ctype, **({"Authorization": f"Bearer {token}"} if token is not None else {})}
    async with aiohttp.ClientSession() as s, s.post(url, data=body, headers=headers) as r:
        return r.status, await r.text()


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("token", [None, "wrong-token", ""])
async def test_unauthenticated_is_401(front: str, endpoint: str, token: str | None) -> None:
    path, ctype, good, _, _ = ENDPOINTS[endpoint]
    status, text = await send(front + path, json.dumps(good).encode(), ctype, token)
    assert status == 401, text
    assert TOKEN not in text


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
async def test_oversized_is_413(front: str, endpoint: str) -> None:
    path, ctype, _, _, _ = ENDPOINTS[endpoint]
    status, text = await send(front + path, b'{"pad": "' + b"x" * (LIMIT * 5) + b'"}', ctype)
    assert status == 413, text


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
async def test_truncated_is_400_naming_the_body(front: str, endpoint: str) -> None:
    path, ctype, good, _, _ = ENDPOINTS[endpoint]
    body = json.dumps(good).encode()
    status, text = await send(front + path, body[: len(body) // 2], ctype)
    assert status == 400, text
    assert "JSON" in text or "(body)" in text, text


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
async def test_wrongly_typed_is_400_naming_the_field(front: str, endpoint: str) -> None:
    path, ctype, _, bad, where = ENDPOINTS[endpoint]
    status, text = await send(front + path, json.dumps(bad).encode(), ctype)
    assert status == 400, text
    assert where in text, text
