"""End to end: CloudEvents and Alertmanager alerts over real HTTP open the right incidents.

The Temporal dev server, the simulator and the real worker run; the ingest app is served on
a real port and driven through an aiohttp client. Each test uses its own DRA pool, so its
workflow ids (and counts of them) belong to it alone.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from temporalio.client import Client

from podmedic.domain.incident import IncidentState
from podmedic.domain.models import FailureMode, Outcome, Permanence
from podmedic.domain.policy_file import load_policy
from tests.helpers import assert_eventually
from workers.ingest.delivery import Deliverer
from workers.ingest.http.app import build_app, start_site
from workers.ingest.http.cloudevents import BATCH, EVENT_TYPE, STRUCTURED
from workers.ingest.settings import HttpSettings, IngestSettings
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
DRIVER = "gpu.nvidia.com"
TOKEN = "e2e-token"


@dataclass
class Front:
    url: str
    client: Client
    deliverer: Deliverer
    http: aiohttp.ClientSession
    pool: str

    def wid(self, device: str) -> str:
        return f"device/{DRIVER}/{self.pool}/{device}"

    async def post(self, body: object, ctype: str = STRUCTURED, path: str = "/v1/events",
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = {"Authorization": f"Bearer {TOKEN}", "Content-Type": ctype} if headers is None else headers
        # Large bodies as a stream: aiohttp warns about (and blocks on) big raw bytes.
        payload = io.BytesIO(data) if len(data) > 512 * 1024 else data
        async with self.http.post(self.url + path, data=payload, headers=sent) as r:
            return r.status, await r.json()

    async def count(self, device: str) -> int:
        """Runs of the device's incident ever started (open or closed)."""
        return (await self.client.count_workflows(f'WorkflowId = "{self.wid(device)}"')).count

    async def settled_count(self, device: str) -> int:
        """``count`` once visibility has caught up: it is written after the start returns (seen lagging
        under CI load), so wait for the first run to show, then give a second run time to show too."""
        async def shown() -> None:
            assert await self.count(device) >= 1, f"no run of {device} visible yet"

        await assert_eventually(shown, timeout=10)
        await asyncio.sleep(1.0)
        return await self.count(device)

    async def state(self, device: str) -> IncidentState:
        handle = self.client.get_workflow_handle_for(DeviceIncidentWorkflow.run, self.wid(device))

        async def classified() -> IncidentState:
            try:
                state = await handle.query(DeviceIncidentWorkflow.get_state)
            except Exception as exc:  # not started or first task not done yet
                raise AssertionError(f"no state yet: {exc}") from exc
            assert state.failure_mode is not None, state
            return state

        return await assert_eventually(classified, timeout=20)


def ce(pool: str, device: str, i: int | str = 0, **data: Any) -> dict[str, Any]:
    body = {"driver": DRIVER, "pool": pool, "device": device, "health": "Unhealthy", **data}
    return {"specversion": "1.0", "id": f"{device}-{i}", "source": "e2e/detector", "type": EVENT_TYPE,
            "data": body}


@pytest_asyncio.fixture(loop_scope="session")
async def front(ingest_worker: tuple[Client, str], tmp_path: Path) -> AsyncIterator[Front]:
    client, task_queue = ingest_worker
    (tmp_path / "token").write_text(TOKEN)
    settings = IngestSettings(http=HttpSettings(port=0, token_file=tmp_path / "token"))
    deliverer = Deliverer(client, load_policy(None), task_queue)
    runner, url = await start_site(build_app(deliverer, settings), settings.http)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as http:
        yield Front(url, client, deliverer, http, pool=f"pool-{uuid.uuid4().hex[:8]}")
    await runner.cleanup()


async def test_xid_79_opens_a_permanent_device_failure(front: Front) -> None:
    status, body = await front.post(ce(front.pool, "gpu-0", code=79, reason="XidError",
                                       message="XID 79: GPU has fallen off the bus"))
    assert status == 202, body
    assert body == {"accepted": 1, "incidents": [front.wid("gpu-0")], "deduplicated": 0}
    state = await front.state("gpu-0")
    assert (state.failure_mode, state.permanence) == (FailureMode.DEVICE_FAILED, Permanence.PERMANENT), state.why


async def test_degradation_over_the_threshold_acts_and_under_it_does_not(front: Front) -> None:
    over = ce(front.pool, "gpu-1", metrics={"ecc_correctable_per_hour": 500})  # default threshold: 100
    under = ce(front.pool, "gpu-2", metrics={"ecc_correctable_per_hour": 5})
    status, body = await front.post([over, under], BATCH)
    assert status == 202 and body["incidents"] == [front.wid("gpu-1"), front.wid("gpu-2")], body
    degraded = await front.state("gpu-1")
    assert degraded.failure_mode is FailureMode.DEVICE_DEGRADED and "500 > 100" in degraded.why
    handle = front.client.get_workflow_handle_for(DeviceIncidentWorkflow.run, front.wid("gpu-2"))
    outcome = await asyncio.wait_for(handle.result(), timeout=20)
    assert outcome.outcome is Outcome.NOT_ACTIONABLE and outcome.failure_mode is FailureMode.DEVICE_DEGRADED
    assert (await front.state("gpu-1")).phase.value != "closed"


async def test_a_thousand_duplicates_open_one_incident_with_one_round_trip(front: Front) -> None:
    trips_before = front.deliverer.delivered
    dup = {"code": 48, "reason": "XidError", "message": "XID 48: double-bit ECC"}
    concurrent = await asyncio.gather(*(front.post(ce(front.pool, "gpu-3", i, **dup)) for i in range(1000)))
    assert {status for status, _ in concurrent} == {202}
    sequential = [await front.post(ce(front.pool, "gpu-4", i, **dup)) for i in range(1000)]
    assert {status for status, _ in sequential} == {202}
    status, body = await front.post([ce(front.pool, "gpu-5", i, **dup) for i in range(1000)], BATCH)
    assert status == 202 and body["accepted"] == 1000 and body["deduplicated"] == 999, body
    assert sum(b["deduplicated"] for _, b in concurrent) == 999
    assert sum(b["deduplicated"] for _, b in sequential) == 999
    assert front.deliverer.delivered - trips_before == 3  # one Temporal round trip per device

    async def one_each() -> None:
        assert [await front.count(d) for d in ("gpu-3", "gpu-4", "gpu-5")] == [1, 1, 1]

    await assert_eventually(one_each, timeout=10)
    for device in ("gpu-3", "gpu-4", "gpu-5"):
        assert (await front.state(device)).events_seen == 1


async def test_refused_requests_start_nothing(front: Front) -> None:
    good = ce(front.pool, "gpu-6", code=79)
    trips_before = front.deliverer.delivered
    bad = ce(front.pool, "gpu-6", 1, code=79)
    bad["data"]["health"] = "Broken"
    status, body = await front.post(bad)
    assert status == 400 and body["problems"][0]["where"] == "data.health", body
    status, body = await front.post(good, headers={"Content-Type": STRUCTURED})
    assert status == 401, body
    status, body = await front.post(good, headers={"Content-Type": STRUCTURED, "Authorization": "Bearer nope"})
    assert status == 401, body
    status, body = await front.post({**good, "padding": "x" * (1 << 20)})
    assert status == 413 and body["limit_bytes"] == 1 << 20, body
    status, body = await front.post(good, "text/plain")
    assert status == 415 and STRUCTURED in body["accepted"], body
    batch = [ce(front.pool, "gpu-6", i, code=79) for i in range(5)]
    batch[3]["data"]["code"] = "seventy-nine"
    status, body = await front.post(batch, BATCH)
    assert status == 400 and [p["where"] for p in body["problems"]] == ["[3].data.code"], body
    status, body = await front.post([good] * 1001, BATCH)
    assert status == 413 and body["limit_events"] == 1000, body
    await asyncio.sleep(1.0)  # a start that slipped through would be visible by now
    assert await front.count("gpu-6") == 0
    assert front.deliverer.delivered == trips_before


async def test_alertmanager_alert_opens_the_device_incident(front: Front) -> None:
    payload = {
        "version": "4", "status": "firing", "receiver": "podmedic", "groupKey": "{}:{}",
        "alerts": [{"status": "firing", "fingerprint": uuid.uuid4().hex[:16], "startsAt": "2025-03-01T10:00:00Z",
                    "labels": {"alertname": "GPUFallenOffBus", "Hostname": front.pool, "gpu": "7"},
                    "annotations": {"summary": "GPU 7 fell off the bus"}}],
    }
    status, body = await front.post(payload, "application/json", "/v1/alertmanager")
    assert status == 202 and body["incidents"] == [front.wid("gpu-7")], body
    state = await front.state("gpu-7")
    assert (state.failure_mode, state.permanence) == (FailureMode.DEVICE_FAILED, Permanence.PERMANENT), state.why


async def test_a_bare_report_after_a_telling_one_adds_nothing(front: Front) -> None:
    """The node agent's XID can come before the kubelet's status write, which names no XID when the
    driver sends no message: that later bare report must not reopen an incident that already closed."""
    status, body = await front.post(ce(front.pool, "gpu-5", "xid", code=79, message="XID 79"))
    assert status == 202 and body["deduplicated"] == 0, body
    status, body = await front.post(ce(front.pool, "gpu-5", "bare"))
    assert status == 202 and body["deduplicated"] == 1, body
    status, body = await front.post(ce(front.pool, "gpu-6", "bare"))  # bare first: news
    assert status == 202 and body["deduplicated"] == 0, body
    status, body = await front.post(ce(front.pool, "gpu-6", "xid", code=79))  # then the XID: news too
    assert status == 202 and body["deduplicated"] == 0, body
    assert await front.settled_count("gpu-5") == 1


async def test_an_xid_that_happens_again_is_news_and_a_repeated_post_of_one_is_not(front: Front) -> None:
    """The node agent stamps each XID with when it happened (data.observed_at): a second XID of the same
    kind is a new occurrence, while the same occurrence posted again (a retry, another id) is not."""
    first = {"code": 48, "reason": "xid", "observed_at": "2026-11-25T01:00:00Z"}
    status, body = await front.post(ce(front.pool, "gpu-7", "a", **first))
    assert status == 202 and body["deduplicated"] == 0, body
    status, body = await front.post(ce(front.pool, "gpu-7", "a-retry", **first))
    assert status == 202 and body["deduplicated"] == 1, body
    status, body = await front.post(ce(front.pool, "gpu-7", "b", **{**first, "observed_at": "2026-11-25T01:04:00Z"}))
    assert status == 202 and body["deduplicated"] == 0, body


async def test_the_agents_batch_then_the_kubelets_bare_report_open_one_incident(front: Front) -> None:
    """The agent posts an XID and its ECC reading in one batch, delivered concurrently: the bare reading
    is judged once the XID has been delivered, so it adds nothing (else it could reopen an incident
    that failed fast on the XID); the kubelet's bare report seconds later adds nothing either."""
    batch = [ce(front.pool, "gpu-9", "xid", code=94, reason="xid"),
             ce(front.pool, "gpu-9", "ecc", reason="ecc-uncorrectable")]
    status, body = await front.post(batch, BATCH)
    assert status == 202 and body["deduplicated"] == 1, body  # the reading waits for the XID on its way
    status, body = await front.post(ce(front.pool, "gpu-9", "kubelet", reason="allocatedResourcesStatus"))
    assert status == 202 and body["deduplicated"] == 1, body
    assert await front.settled_count("gpu-9") == 1
