"""Training workloads: progress, checkpoint handshake, in-place restart requests."""

from __future__ import annotations

import asyncio
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.engine import SimEngine
from tests.simkit import fast_config, running_engine, wait_until


def _progress(engine: SimEngine, job: str = "train") -> dict[str, Any]:
    return next(j for j in engine.state()["jobs"] if j["name"] == job)


def _ready_pod(engine: SimEngine, job: str = "train") -> dict[str, Any] | None:
    return next((p for p in engine.state()["pods"] if p["job"] == job and p["ready"]), None)


def _annotate(engine: SimEngine, pod: str, **annotations: str) -> None:
    engine.store.mutate("pods", "default", pod, lambda p: p["metadata"].setdefault("annotations", {}).update(
        {k.replace("_", "-").replace("--", "/"): v for k, v in annotations.items()}))


def _pod(engine: SimEngine, name: str) -> Obj:
    return engine.store.get("pods", "default", name)


async def test_training_job_shape_and_progress() -> None:
    async with running_engine() as engine:
        job = engine.create_training_job("train")
        template = job["spec"]["template"]
        assert template["metadata"]["annotations"]["sim.podmedic.io/training"] == "true"
        container = template["spec"]["containers"][0]
        assert container["restartPolicyRules"] == [
            {"action": "Restart", "exitCodes": {"operator": "In", "values": [85]}}]
        assert template["spec"]["restartPolicy"] == "Never"
        assert template["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "train-gpu"}]
        await wait_until(lambda: _progress(engine)["step"] >= 5, what="steps")
        await wait_until(lambda: int(engine.store.get("jobs", "default", "train")["metadata"]["annotations"].get(
            "sim.podmedic.io/step", "0")) > 0, what="step annotation")
        assert _progress(engine)["pods_created"] == 1


async def test_checkpoint_handshake_and_progress_loss() -> None:
    async with running_engine() as engine:
        engine.create_training_job("train")
        pod = await wait_until(lambda: _ready_pod(engine), what="ready pod")
        await wait_until(lambda: _progress(engine)["step"] >= 4, what="steps")
        _annotate(engine, pod["name"], **{"podmedic.io/checkpoint-request": "req-1"})
        await wait_until(lambda: _pod(engine, pod["name"])["metadata"]["annotations"].get(
            "podmedic.io/checkpoint-ack") == "req-1", what="ack")
        ann = _pod(engine, pod["name"])["metadata"]["annotations"]
        saved = _progress(engine)["checkpointed_step"]
        assert saved >= 4
        assert ann["podmedic.io/checkpoint-id"] == f"train-step-{saved}"
        assert ann["podmedic.io/checkpoint-location"] == f"sim://default/train/step-{saved}"
        # The same request id is not saved again.
        _annotate(engine, pod["name"], **{"podmedic.io/checkpoint-ack": ""})
        await asyncio.sleep(0.3)
        assert _progress(engine)["checkpoints"] == 1
        await wait_until(lambda: _progress(engine)["step"] >= saved + 3, what="more steps")
        # A crash loses the steps since the checkpoint.
        rt = engine.kubelet.pods[("default", pod["name"])]
        before = _progress(engine)["step"]
        engine.kubelet.exit_container(rt, rt.containers[0], 139)
        progress = _progress(engine)
        assert progress["step"] == saved and progress["lost_steps"] == before - saved


async def test_restart_request_restarts_in_place_once() -> None:
    async with running_engine() as engine:
        engine.create_training_job("train")
        pod = await wait_until(lambda: _ready_pod(engine), what="ready pod")
        uid, devices = pod["uid"], pod["devices"]
        _annotate(engine, pod["name"], **{"podmedic.io/restart-request": "r-1"})
        await wait_until(lambda: (p := _ready_pod(engine)) and p["restart_count"] == 1, what="restarted, Ready")
        again = _ready_pod(engine)
        assert again is not None and again["uid"] == uid and again["devices"] == devices
        status = _pod(engine, pod["name"])["status"]["containerStatuses"][0]
        assert status["lastState"]["terminated"]["exitCode"] == 85
        await asyncio.sleep(0.3)  # a request id is honoured once
        assert _ready_pod(engine)["restart_count"] == 1  # type: ignore[index]
        assert _progress(engine)["pods_created"] == 1


async def test_restart_without_matching_rule_replaces_the_pod() -> None:
    async with running_engine() as engine:
        engine.create_training_job("train")
        pod = await wait_until(lambda: _ready_pod(engine), what="ready pod")
        _annotate(engine, pod["name"], **{"podmedic.io/restart-exit-code": "3",
                                          "podmedic.io/restart-request": "r-1"})
        await wait_until(lambda: _pod(engine, pod["name"])["status"]["phase"] == "Failed", what="Failed")
        new = await wait_until(lambda: (p := _ready_pod(engine)) and p["uid"] != pod["uid"] and p, what="new pod")
        assert new["restart_count"] == 0
        assert _progress(engine)["pods_created"] == 2


async def test_transient_crash_fault_clears_when_restarted() -> None:
    async with running_engine() as engine:
        engine.create_training_job("train")
        pod = await wait_until(lambda: _ready_pod(engine), what="ready pod")
        driver, pool, device = pod["devices"][0].split("/")
        engine.set_device_health(driver, pool, device, "Unhealthy", code=13, crash=True, clears_on_restart=True)
        # restartPolicy Never and exit 134 matches no rule: the pod fails, the Job replaces it,
        # and the GPU reset heals the device.
        await wait_until(lambda: (p := _ready_pod(engine)) and p["uid"] != pod["uid"], what="replacement Ready")
        assert engine.devices.fault((driver, pool, device)).health == "Healthy"


async def test_periodic_checkpoints() -> None:
    async with running_engine(fast_config(checkpoint_every_steps=3)) as engine:
        engine.create_training_job("train")
        await wait_until(lambda: _progress(engine)["checkpointed_step"] >= 3, what="periodic checkpoint")
        assert _progress(engine)["checkpointed_step"] % 3 == 0
