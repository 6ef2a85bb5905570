"""The kubelet's device health cache as the pod sees it when a driver's health stream stops.

Upstream, pkg/kubelet/cm/dra/healthinfo.go: a device last reported longer ago than its health
timeout (the plugin's ``health_check_timeout_seconds``, else 30 s) is Unknown; manager.go
``HandleWatchResourcesStream`` clears the driver's cache when the stream ends, so every device is
Unknown at once; a device never reported is Unknown.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from podmedic_sim.config import DriverPlugin
from podmedic_sim.engine import SimEngine
from tests.simkit import fast_config, gpu_pod, gpu_template, running_engine, wait_until


def _health(engine: SimEngine, pod: str) -> str:
    status = engine.store.get("pods", "default", pod).get("status") or {}
    return str(status["containerStatuses"][0]["allocatedResourcesStatus"][0]["resources"][0]["health"])


async def _started(engine: SimEngine, pod: str) -> tuple[str, str, str]:
    engine.store.create("resourceclaimtemplates", gpu_template())
    engine.store.create("pods", gpu_pod(pod))
    await wait_until(lambda: engine.claims.pod_devices(engine.store.get("pods", "default", pod))
                     and "allocatedResourcesStatus" in str(engine.store.get("pods", "default", pod)), what="reported")
    return engine.claims.pod_devices(engine.store.get("pods", "default", pod))[0][2]


async def test_a_silent_stream_turns_unknown_after_the_plugins_timeout_and_back_when_it_streams() -> None:
    plugin = DriverPlugin(cdi_ids="per-device", health_timeout_s=2.0)
    async with running_engine(fast_config(plugins={"gpu.nvidia.com": plugin})) as engine:
        dev = await _started(engine, "p")
        node = engine.devices.node_of(dev)
        assert node is not None and _health(engine, "p") == "Healthy"
        engine.set_health_stream("gpu.nvidia.com", node, "silent")
        silenced = time.monotonic()
        await asyncio.sleep(0.3)
        if time.monotonic() - silenced < 1.5:  # a loaded machine may sleep longer: then the check says nothing
            assert _health(engine, "p") == "Healthy", "still within the timeout"
        await wait_until(lambda: _health(engine, "p") == "Unknown", timeout=20, what="Unknown after the timeout")
        assert time.monotonic() - silenced >= 1.9, "not before the plugin's health timeout"
        engine.set_health_stream("gpu.nvidia.com", node, "streaming")
        await wait_until(lambda: _health(engine, "p") == "Healthy", timeout=20, what="Healthy again")


async def test_an_ended_stream_is_unknown_at_once() -> None:
    async with running_engine() as engine:
        dev = await _started(engine, "p")
        node = engine.devices.node_of(dev)
        assert node is not None
        engine.set_health_stream("gpu.nvidia.com", node, "ended")
        # At once: well before the 30 s health timeout the silent case waits for.
        await wait_until(lambda: _health(engine, "p") == "Unknown", timeout=10, what="Unknown at once")


async def test_a_node_without_the_driver_is_refused() -> None:
    async with running_engine() as engine:
        with pytest.raises(KeyError, match=r"no gpu\.amd\.com devices"):
            engine.set_health_stream("gpu.amd.com", "node-0000", "ended")
