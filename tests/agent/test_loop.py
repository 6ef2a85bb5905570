"""The agent loop end to end, NVML aside: a scripted reader, the real translator and poster,
and a stub ingest that first answers 503."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections import deque
from dataclasses import replace

from tests.agent.fakes import GPUS, IngestStub, reading
from tests.helpers import assert_eventually
from workers.agent.loop import once, run_agent, run_agents
from workers.agent.post import Poster
from workers.agent.readings import DeviceInfo, Reading, XidEvent
from workers.agent.translate import AgentConfig, Translator
from workers.ingest.http.cloudevents import parse_batch


class ScriptedReader:
    """Readings from a script: temperatures per read, XIDs per wait."""

    def __init__(self, temperatures: list[float], xids: list[list[int]]) -> None:
        self.devices: list[DeviceInfo] = GPUS
        self.temperatures = deque(temperatures)
        self.xids = deque(xids)
        self.reads = 0

    def wait_xids(self, timeout_ms: int) -> list[XidEvent]:
        time.sleep(timeout_ms / 1000)
        codes = self.xids.popleft() if self.xids else []
        return [XidEvent(0, code, dt.datetime.now(dt.UTC)) for code in codes]

    def read_all(self, at: dt.datetime) -> list[Reading]:
        self.reads += 1
        temperature = self.temperatures.popleft() if len(self.temperatures) > 1 else self.temperatures[0]
        return [replace(reading(0, index=d.index, temperature_c=temperature if d.index == 1 else 50.0), at=at)
                for d in self.devices]


async def test_loop_reports_xids_and_degradation_through_a_503(ingest: IngestStub) -> None:
    reader = ScriptedReader(temperatures=[60, 60, 95, 95, 70], xids=[[], [79], [], []])
    translator = Translator(AgentConfig(node="gpu-node-07", report_interval_s=3600), GPUS)
    poster = Poster(ingest.url, token="t", backoff_s=(0.05, 0.1))
    ingest.answer(503)
    stop = asyncio.Event()
    task = asyncio.create_task(run_agent(reader, translator, poster, interval_s=0.03, stop=stop, xid_wait_ms=10))

    async def delivered() -> None:
        accepted = [e for _, batch in ingest.requests[1:] for e in batch]
        assert [(e["data"]["device"], e["data"]["health"], e["data"].get("reason")) for e in accepted] == [
            ("gpu-0", "Unhealthy", "xid"), ("gpu-1", "Unhealthy", "degraded"), ("gpu-1", "Healthy", "recovered")]

    await assert_eventually(delivered, timeout=20, interval=0.05)
    stop.set()
    await asyncio.wait_for(task, 10)
    first_body = ingest.requests[0][1]
    assert first_body[0]["data"]["code"] == 79  # refused with 503 first, then sent again
    observations = parse_batch(json.dumps(ingest.events).encode())
    assert {o.event_id for o in observations} == {f"ce/podmedic-agent/gpu-node-07/{e['id']}" for e in ingest.events}
    assert poster.pending == 0 and reader.reads >= 5


def test_once_prints_every_device_and_any_xid() -> None:
    reader = ScriptedReader(temperatures=[96], xids=[[31]])
    events = once(reader, Translator(AgentConfig(node="n1"), GPUS), xid_wait_ms=1)
    assert [(e["data"]["device"], e["data"]["health"], e["data"].get("code")) for e in events] == [
        ("gpu-0", "Healthy", None), ("gpu-1", "Unhealthy", None), ("gpu-0", "Unhealthy", 31)]
    assert len(parse_batch(json.dumps(events).encode())) == 3


class OneXidThenQuiet:
    """A node whose XID is ready at once, then nothing: each further wait runs to its timeout."""

    def __init__(self, code: int | None) -> None:
        self.devices: list[DeviceInfo] = GPUS
        self.codes = [code] if code is not None else []

    def wait_xids(self, timeout_ms: int) -> list[XidEvent]:
        if self.codes:
            return [XidEvent(0, self.codes.pop(), dt.datetime.now(dt.UTC))]
        time.sleep(timeout_ms / 1000)
        return []

    def read_all(self, at: dt.datetime) -> list[Reading]:
        return []


async def test_an_xid_on_one_node_is_posted_without_waiting_for_the_other_nodes(ingest: IngestStub) -> None:
    # Deployed, each node runs its own agent (deploy/: a DaemonSet), so one node's quiet wait never holds
    # another node's XID; an agent process reading several simulated nodes must not either.
    nodes = [(OneXidThenQuiet(None), Translator(AgentConfig(node="quiet"), GPUS)),
             (OneXidThenQuiet(79), Translator(AgentConfig(node="failing"), GPUS))]
    poster = Poster(ingest.url, token="t", backoff_s=(0.05, 0.1))
    stop = asyncio.Event()
    task = asyncio.create_task(run_agents(nodes, poster, interval_s=3600, stop=stop, xid_wait_ms=5000))

    async def posted() -> None:
        assert [(e["data"]["node"], e["data"].get("code")) for e in ingest.events] == [("failing", 79)]

    await assert_eventually(posted, timeout=4, interval=0.02)  # before the quiet node's 5 s wait ends
    stop.set()
    await asyncio.wait_for(task, 15)
