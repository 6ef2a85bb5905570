"""A trainer that saves on SIGTERM: what a graceful deletion keeps, and what it cannot.

The behaviour modelled is a trainer's SIGTERM handler (torchelastic and PyTorch Lightning install
one): the kubelet sends SIGTERM on a graceful deletion and removes the pod after
``terminationGracePeriodSeconds`` (kubernetes.io, "Pod Lifecycle", Termination of Pods), so a save
that takes longer than the grace period never finishes. A synchronous job whose rank has already
died holds no consistent state to save: its surviving ranks' SIGTERM keeps nothing. Nor can a rank whose
GPU just failed in a way that ends the processes on it (NVIDIA's XID catalog: XID 79, fallen off the bus;
48, a double-bit ECC error), even in the seconds before its process is ended.
"""

from __future__ import annotations

from typing import Any

from podmedic_sim.engine import SimEngine
from tests.simkit import FAST, fast_config, running_engine, wait_until


def _progress(engine: SimEngine, job: str = "train") -> dict[str, Any]:
    return next(j for j in engine.state()["jobs"] if j["name"] == job)


def _ready(engine: SimEngine, count: int, job: str = "train") -> list[dict[str, Any]] | None:
    pods = [p for p in engine.state()["pods"] if p["job"] == job and p["ready"] and not p["deleting"]]
    return pods if len(pods) >= count else None


def _config(save_s: float, grace_s: float) -> Any:
    return fast_config(timings=FAST.model_copy(update={"checkpoint_save_s": save_s, "termination_grace_s": grace_s}))


async def _deleted_after_steps(engine: SimEngine, sigterm: bool, parallelism: int = 2) -> dict[str, Any]:
    """Run a job to a few steps past its last checkpoint, delete one pod gracefully, return the progress."""
    engine.create_training_job("train", parallelism=parallelism, checkpoint_on_sigterm=sigterm)
    pods = await wait_until(lambda: _ready(engine, parallelism), what="every rank Ready")
    await wait_until(lambda: _progress(engine)["step"] >= 5, what="steps")
    engine.delete_pod("default", pods[0]["name"])
    return await wait_until(lambda: (p := _progress(engine))["restarts"] >= 1 and p, what="the rank stopped")


async def test_a_graceful_deletion_keeps_every_step_when_the_trainer_saves_on_sigterm() -> None:
    async with running_engine(_config(save_s=0.05, grace_s=0.5)) as engine:
        progress = await _deleted_after_steps(engine, sigterm=True)
        assert progress["lost_steps"] == 0, progress
        assert progress["checkpointed_step"] == progress["step"] >= 5, progress
        assert progress["sigterm_checkpoints"] == 1, progress


async def test_without_the_handler_the_deletion_loses_the_steps_since_the_last_checkpoint() -> None:
    async with running_engine(_config(save_s=0.05, grace_s=0.5)) as engine:
        progress = await _deleted_after_steps(engine, sigterm=False)
        assert progress["lost_steps"] >= 5 and progress["sigterm_checkpoints"] == 0, progress


async def test_a_save_longer_than_the_grace_period_never_finishes() -> None:
    async with running_engine(_config(save_s=1.0, grace_s=0.2)) as engine:
        progress = await _deleted_after_steps(engine, sigterm=True)
        assert progress["lost_steps"] >= 5 and progress["sigterm_checkpoints"] == 0, progress


async def test_after_a_rank_crashed_the_survivors_sigterm_keeps_nothing() -> None:
    async with running_engine(_config(save_s=0.05, grace_s=0.5)) as engine:
        engine.create_training_job("train", parallelism=2, checkpoint_on_sigterm=True)
        pods = await wait_until(lambda: _ready(engine, 2), what="every rank Ready")
        await wait_until(lambda: _progress(engine)["step"] >= 5, what="steps")
        crashed = engine.kubelet.pods[("default", pods[0]["name"])]
        engine.kubelet.exit_container(crashed, crashed.containers[0], 139)
        lost = _progress(engine)["lost_steps"]
        assert lost >= 5
        engine.delete_pod("default", pods[1]["name"])
        progress = await wait_until(lambda: (p := _progress(engine))["restarts"] >= 2 and p, what="the rank stopped")
        assert progress["lost_steps"] == lost and progress["sigterm_checkpoints"] == 0, progress


async def test_an_api_delete_of_a_controllers_pod_is_graceful_so_the_trainer_saves() -> None:
    """A Job's pod carries no terminationGracePeriodSeconds here, but upstream defaults every pod to 30 s
    (pkg/apis/core/v1/defaults.go), so an API DELETE of it is graceful (pkg/registry/core/pod/strategy.go)."""
    from podmedic_sim.handlers_request import Target
    from podmedic_sim.handlers_write import delete_object
    from podmedic_sim.resources import RESOURCES

    async with running_engine(_config(save_s=0.05, grace_s=0.5)) as engine:
        engine.create_training_job("train", parallelism=1, checkpoint_on_sigterm=True)
        (pod,) = await wait_until(lambda: _ready(engine, 1), what="the rank Ready")
        await wait_until(lambda: _progress(engine)["step"] >= 5, what="steps")
        pods = next(r for r in RESOURCES if r.plural == "pods")
        answer = delete_object(engine.store, Target(pods, "default", pod["name"], None), {}, False)
        assert answer["metadata"]["deletionGracePeriodSeconds"] == 30
        progress = await wait_until(lambda: (p := _progress(engine))["restarts"] >= 1 and p, what="the rank stopped")
        assert progress["sigterm_checkpoints"] == 1 and progress["lost_steps"] == 0, progress


async def test_a_rank_whose_gpu_failed_cannot_save_even_before_its_process_dies() -> None:
    # The deletion's SIGTERM comes at once, inside the crash_after_s before the failed GPU's process ends
    # (an oracle drain at the fault); the state to save is on the GPU that is gone.
    slow_crash = FAST.model_copy(update={"checkpoint_save_s": 0.05, "termination_grace_s": 0.5, "crash_after_s": 5.0})
    async with running_engine(fast_config(timings=slow_crash)) as engine:
        engine.create_training_job("train", parallelism=1, checkpoint_on_sigterm=True)
        (pod,) = await wait_until(lambda: _ready(engine, 1), what="the rank Ready")
        await wait_until(lambda: _progress(engine)["step"] >= 5, what="steps")
        driver, pool, device = pod["devices"][0].split("/")
        engine.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=79, crash=True)
        engine.delete_pod("default", pod["name"])
        progress = await wait_until(lambda: (p := _progress(engine))["restarts"] >= 1 and p, what="the rank stopped")
        assert progress["sigterm_checkpoints"] == 0 and progress["lost_steps"] >= 5, progress
