"""The node agent's simulator backend: NVML's view of simulated GPUs, over the simulator's HTTP.

What NVML shows is the reference (NVML API reference: ``nvmlEventSetWait`` delivers XID critical
errors that happen after registration; ``NVML_ERROR_GPU_IS_LOST`` once a GPU fell off the bus,
XID 79; the volatile uncorrected ECC count rises with a double-bit error, XID 48).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podmedic_sim import SimCluster
from tests.helpers import served_sim
from workers.agent.loop import once
from workers.agent.sim_reader import SimNvmlReader, SimUnavailable, sim_nodes
from workers.agent.translate import AgentConfig, Translator


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(Path(tmp_path_factory.mktemp("nvml")), nodes=2, devices_per_node=2) as cluster:
        yield cluster


def _fault(sim: SimCluster, node: str, device: str, code: int | None, health: str = "Unhealthy") -> None:
    sim.call(lambda: sim.engine.set_device_health("gpu.nvidia.com", node, device, health, reason="XidError",
                                                  code=code))


def test_lists_the_gpu_nodes_and_their_gpus_as_the_slices_describe_them(sim: SimCluster) -> None:
    assert sim_nodes(sim.url) == ["node-0000", "node-0001"]
    reader = SimNvmlReader(sim.url, "node-0001")
    assert [d.index for d in reader.devices] == [0, 1]
    slice_uuids = {d["name"]: d["attributes"]["uuid"]["string"]
                   for s in sim.call(lambda: sim.engine.store.list("resourceslices"))
                   if s["spec"]["nodeName"] == "node-0001" for d in s["spec"]["devices"]}
    assert [d.uuid for d in reader.devices] == [slice_uuids["gpu-0"], slice_uuids["gpu-1"]]


def test_an_xid_on_an_idle_gpu_is_an_event_once_and_only_after_registration(sim: SimCluster) -> None:
    _fault(sim, "node-0000", "gpu-0", 31)  # before the agent registers: NVML would not deliver it
    _fault(sim, "node-0000", "gpu-0", None, health="Healthy")
    reader = SimNvmlReader(sim.url, "node-0000")
    assert reader.wait_xids(50) == []
    _fault(sim, "node-0000", "gpu-1", 79)
    events = reader.wait_xids(2000)
    assert [(e.index, e.xid) for e in events] == [(1, 79)]
    assert reader.wait_xids(50) == []  # delivered once
    readings = {r.index: r for r in reader.read_all(dt.datetime.now(dt.UTC))}
    assert readings[1].lost and not readings[0].lost
    translator = Translator(AgentConfig(node="node-0000"), reader.devices)
    posted = translator.xids(events)
    assert posted[0]["data"]["code"] == 79
    assert (posted[0]["data"]["pool"], posted[0]["data"]["device"]) == ("node-0000", "gpu-1")
    _fault(sim, "node-0000", "gpu-1", None, health="Healthy")


def test_a_double_bit_ecc_xid_raises_the_uncorrected_count(sim: SimCluster) -> None:
    reader = SimNvmlReader(sim.url, "node-0001")
    before = {r.index: r.ecc_uncorrected for r in reader.read_all(dt.datetime.now(dt.UTC))}
    _fault(sim, "node-0001", "gpu-0", 48)
    after = {r.index: r.ecc_uncorrected for r in reader.read_all(dt.datetime.now(dt.UTC))}
    assert after[0] == (before[0] or 0) + 1 and after[1] == before[1]
    events = once(reader, Translator(AgentConfig(node="node-0001"), reader.devices), xid_wait_ms=500)
    assert any(e["data"].get("code") == 48 for e in events)
    _fault(sim, "node-0001", "gpu-0", None, health="Healthy")


def test_an_unknown_node_or_a_dead_simulator_is_a_clear_error(sim: SimCluster) -> None:
    with pytest.raises(SimUnavailable, match=r"node-9999.*404"):
        SimNvmlReader(sim.url, "node-9999")
    with pytest.raises(SimUnavailable, match="cannot"):
        sim_nodes("http://127.0.0.1:9")


def test_a_replaced_gpu_has_a_new_uuid_and_the_agent_reports_it_healthy(sim: SimCluster) -> None:
    """A vendor's RMA swaps the GPU: the driver republishes the slice with the new GPU's UUID and NVML
    answers it (the NVIDIA DRA driver's slice carries ``uuid``; ``nvmlDeviceGetUUID``). The node agent
    is then the one source that reports the idle new GPU Healthy, newer than the old one's failure."""
    reader = SimNvmlReader(sim.url, "node-0001")
    translator = Translator(AgentConfig(node="node-0001"), reader.devices)
    old_uuid = reader.devices[1].uuid
    _fault(sim, "node-0001", "gpu-1", 79)
    failed = translator.xids(reader.wait_xids(2000)) + [
        e for r in reader.read_all(dt.datetime.now(dt.UTC)) for e in translator.reading(r)]
    assert {(e["data"]["device"], e["data"]["health"]) for e in failed} == {("gpu-1", "Unhealthy")}
    assert [e for r in reader.read_all(dt.datetime.now(dt.UTC)) for e in translator.reading(r)] == []
    sim.call(lambda: sim.engine.set_device_health("gpu.nvidia.com", "node-0001", "gpu-1", "Healthy",
                                                  reason="DeviceReplaced", message="replaced under VND-1"))
    readings = reader.read_all(dt.datetime.now(dt.UTC))
    new_uuid = {r.index: r.uuid for r in readings}[1]
    assert new_uuid and new_uuid != old_uuid
    slice_uuids = {d["name"]: d["attributes"]["uuid"]["string"]
                   for s in sim.call(lambda: sim.engine.store.list("resourceslices"))
                   if s["spec"]["nodeName"] == "node-0001" for d in s["spec"]["devices"]}
    assert slice_uuids["gpu-1"] == new_uuid
    [healthy] = [e for r in readings for e in translator.reading(r)]
    assert (healthy["data"]["device"], healthy["data"]["health"], healthy["data"]["reason"]) == (
        "gpu-1", "Healthy", "replaced")
    assert old_uuid in healthy["data"]["message"] and new_uuid in healthy["data"]["message"]
    assert [e for r in reader.read_all(dt.datetime.now(dt.UTC)) for e in translator.reading(r)] == []


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_event_wait_answers_when_an_xid_arrives_not_at_its_timeout(sim: SimCluster) -> None:
    # nvmlEventSetWait_v2 (NVML API reference): "If some events are ready to be delivered at the time of
    # the call, function returns immediately. If there are no events ready to be delivered, function
    # sleeps till event arrives but not longer than specified timeout."
    url = f"{sim.url}/sim/v1/nodes/node-0001/nvml"
    since = int(_get(url)[1]["next"])
    begun = time.monotonic()
    status, quiet = _get(f"{url}?since={since}&wait_ms=400")
    assert status == 200 and quiet["xids"] == [] and time.monotonic() - begun >= 0.35
    later = threading.Timer(0.3, lambda: _fault(sim, "node-0001", "gpu-1", 94))
    later.start()
    begun = time.monotonic()
    status, woken = _get(f"{url}?since={since}&wait_ms=10000")
    took = time.monotonic() - begun
    later.join()
    assert status == 200 and [x["xid"] for x in woken["xids"]] == [94]
    assert took < 8, f"answered after {took:.1f}s: at the timeout, not at the XID"
    status, ready = _get(f"{url}?since={since}&wait_ms=10000")  # ready at the call: at once
    assert status == 200 and [x["xid"] for x in ready["xids"]] == [94]
    for bad, why in (("wait_ms=10001", "not between 0 and 10000"), ("wait_ms=soon", "wait_ms: not an integer")):
        status, body = _get(f"{url}?since={since}&{bad}")
        assert status == 400 and why in str(body["error"]), body
    _fault(sim, "node-0001", "gpu-1", None, health="Healthy")
