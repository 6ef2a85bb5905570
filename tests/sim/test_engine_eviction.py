"""Device-taint eviction controller: NoExecute timing, tolerations and rule conditions."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from podmedic_sim.engine import SimEngine
from tests.simkit import gpu_pod, gpu_template, running_engine, wait_until


def _rule(effect: str, device: str, pool: str = "node-0000") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": f"r-{device}"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": pool, "device": device},
                     "taint": {"key": "podmedic.io/unhealthy", "value": "true", "effect": effect}}}


def _condition(engine: SimEngine, name: str) -> dict[str, Any]:
    rule = engine.store.get("devicetaintrules", None, name)
    conds = (rule.get("status") or {}).get("conditions") or [{}]
    return dict(conds[0])


async def _running_pod(engine: SimEngine, name: str, **template: Any) -> str:
    """Start a pod; returns its device name (on node-0000: the scheduler fills nodes in order)."""
    engine.store.create("resourceclaimtemplates", gpu_template(name, **template))
    engine.store.create("pods", gpu_pod(name, template=name))
    pod = await wait_until(lambda: engine.store.find("pods", "default", name) and engine.claims.pod_devices(
        engine.store.get("pods", "default", name)), what="allocated")
    assert pod[0][2][1] == "node-0000"
    return str(pod[0][2][2])


async def test_no_execute_rule_evicts_untolerating_pod_at_once() -> None:
    async with running_engine() as engine:
        device = await _running_pod(engine, "victim")
        await _running_pod(engine, "bystander")
        engine.store.create("devicetaintrules", _rule("NoExecute", device))
        await wait_until(lambda: engine.store.find("pods", "default", "victim") is None, what="victim evicted")
        assert engine.store.find("pods", "default", "bystander") is not None
        events = [e for e in engine.store.list("events", "default") if e["reason"] == "DeviceTaintManagerEviction"]
        assert events and events[0]["involvedObject"]["name"] == "victim"
        await wait_until(lambda: _condition(engine, f"r-{device}").get("status") == "False", what="condition False")
        cond = _condition(engine, f"r-{device}")
        assert cond["type"] == "EvictionInProgress" and cond["observedGeneration"] == 1
        assert "1 pods evicted" in cond["message"]


async def test_toleration_seconds_delays_eviction() -> None:
    tolerations = [{"key": "podmedic.io/unhealthy", "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 1}]
    async with running_engine() as engine:
        device = await _running_pod(engine, "slow", tolerations=tolerations)
        added = time.monotonic()
        engine.store.create("devicetaintrules", _rule("NoExecute", device))
        await wait_until(lambda: _condition(engine, f"r-{device}").get("status") == "True", what="in progress")
        assert _condition(engine, f"r-{device}")["reason"] == "PodsPendingEviction"
        await asyncio.sleep(0.5)
        assert engine.store.find("pods", "default", "slow") is not None
        await wait_until(lambda: engine.store.find("pods", "default", "slow") is None, timeout=30, what="evicted")
        assert time.monotonic() - added >= 0.9  # not before tolerationSeconds (1 s); the wait is the deadline
        await wait_until(lambda: _condition(engine, f"r-{device}").get("status") == "False", what="done")


async def test_tolerated_for_ever_and_no_schedule_keep_pods() -> None:
    tolerations = [{"key": "podmedic.io/unhealthy", "operator": "Exists"}]
    async with running_engine() as engine:
        kept = await _running_pod(engine, "kept", tolerations=tolerations)
        other = await _running_pod(engine, "other")
        engine.store.create("devicetaintrules", _rule("NoExecute", kept))
        engine.store.create("devicetaintrules", _rule("NoSchedule", other))
        await wait_until(lambda: _condition(engine, f"r-{kept}").get("reason") == "Completed", what="completed")
        await asyncio.sleep(0.2)
        assert engine.store.find("pods", "default", "kept") is not None
        assert engine.store.find("pods", "default", "other") is not None
        assert _condition(engine, f"r-{other}")["status"] == "False"


async def test_slice_taint_no_execute_evicts() -> None:
    async with running_engine() as engine:
        device = await _running_pod(engine, "victim")
        engine.set_slice_taint("gpu.nvidia.com", "node-0000", device, "gpu.nvidia.com/xid", "79", "NoExecute")
        await wait_until(lambda: engine.store.find("pods", "default", "victim") is None, what="evicted by slice taint")
