"""The ranks of a synchronous training job fail together (``podmedic_sim/collectives.py``).

Sources of the expected shapes: PyTorch ``torch.distributed.init_process_group`` (``timeout``: how
long collectives wait before they are aborted and the process crashes, 10 minutes by default for
NCCL) and ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` (3 by default: tear the process down on an error, so a
peer's exit takes every rank down); the Llama 3 paper (arXiv 2407.21783, section 3.3.4: a failed
remote GPU or NVLink shows as stalled load/store operations, the job hangs rather than exits);
torchrun (``--max-restarts``: the agent restarts the workers of its node on a worker failure and
cannot see a hung worker). Exit code 134 is SIGABRT, the NCCL watchdog's abort.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podmedic_sim.collectives import ABORT_EXIT_CODE
from podmedic_sim.engine import SimEngine
from tests.simkit import FAST, fast_config, running_engine, wait_until


def _job(engine: SimEngine, job: str = "train") -> dict[str, Any]:
    return next(j for j in engine.state()["jobs"] if j["name"] == job)


def _ready(engine: SimEngine, count: int, job: str = "train") -> list[dict[str, Any]] | None:
    pods = [p for p in engine.state()["pods"] if p["job"] == job and p["ready"] and not p["deleting"]]
    return pods if len(pods) >= count else None


def _exit_codes(engine: SimEngine) -> list[int]:
    """The exit code of every training container that terminated, from pod status."""
    codes = []
    for pod in engine.store.iter("pods", "default"):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if (done := (status.get("state") or {}).get("terminated")) is not None:
                codes.append(int(done["exitCode"]))
    return codes


async def _running(engine: SimEngine, ranks: int, **collectives: float) -> list[dict[str, Any]]:
    engine.create_training_job("train", parallelism=ranks, collectives=collectives)
    pods = await wait_until(lambda: _ready(engine, ranks), what="every rank Ready")
    await wait_until(lambda: _job(engine)["step"] >= 3, what="steps")
    return pods


@pytest.mark.parametrize("declared", [True, False])
async def test_a_rank_that_exits_takes_every_peer_down_once_the_transport_sees_it(declared: bool) -> None:
    async with running_engine() as engine:
        pods = await _running(engine, 3, **({"peer_exit_s": 0.2} if declared else {}))
        engine.crash_pod("default", pods[0]["name"], exit_code=1)
        if declared:
            await wait_until(lambda: _exit_codes(engine).count(ABORT_EXIT_CODE) == 2, what="both peers aborted")
            await wait_until(lambda: _job(engine)["pods_created"] >= 6, what="every rank replaced")
        else:  # a trainer that declares no peer timeout: its other ranks wait, only the crashed one is replaced
            await wait_until(lambda: _job(engine)["pods_created"] >= 4, what="the crashed rank replaced")
            await wait_until(lambda: _ready(engine, 3), what="the job whole again")
            assert ABORT_EXIT_CODE not in _exit_codes(engine) and _job(engine)["pods_created"] == 4


async def test_a_hung_rank_stays_ready_stops_every_step_and_its_peers_abort_at_the_collective_timeout() -> None:
    async with running_engine() as engine:
        pods = await _running(engine, 2, peer_exit_s=0.1, collective_timeout_s=1.5)
        engine.workloads.collectives.hang(*engine.workloads.rank("default", pods[1]["name"]))
        step = _job(engine)["step"]
        await asyncio.sleep(0.5)  # what must not happen meanwhile has no condition to wait for
        assert _job(engine)["step"] == step, "no rank makes a step while one hangs"
        assert _ready(engine, 2) and not _exit_codes(engine), "the hung rank's pod is Running and Ready"
        await wait_until(lambda: _exit_codes(engine).count(ABORT_EXIT_CODE) == 2, timeout=10,
                         what="every rank aborted by the watchdog")
        await wait_until(lambda: _ready(engine, 2) and _job(engine)["step"] > 0, timeout=10, what="training again")


async def test_a_hung_rank_saves_nothing_on_request() -> None:
    async with running_engine() as engine:
        pods = await _running(engine, 2)
        engine.workloads.collectives.hang(*engine.workloads.rank("default", pods[0]["name"]))
        assert not engine.workloads.collectives.can_save(("default", "train"))


async def test_in_job_restarts_keep_the_containers_until_they_run_out() -> None:
    async with running_engine() as engine:
        pods = await _running(engine, 2, peer_exit_s=0.1, in_job_restarts=2, in_job_restart_s=0.2)
        for used in (1, 2):
            engine.crash_pod("default", pods[0]["name"], exit_code=1)
            assert not _exit_codes(engine), f"restart {used}: the agent restarted the workers in place"
            await wait_until(lambda: _job(engine)["step"] >= 1, what="steps after the in-job restart")
        engine.crash_pod("default", pods[0]["name"], exit_code=1)
        await wait_until(lambda: 1 in _exit_codes(engine), what="the agent out of restarts: the container exits")


async def test_in_job_hang_detection_ends_a_hung_rank_long_before_the_collective_timeout() -> None:
    """NVIDIA Resiliency Extension (FaultToleranceConfig, rank heartbeats): a rank whose heartbeats stop for
    the heartbeat timeout is ended and the workers restarted by the launcher, in the same containers."""
    async with running_engine() as engine:
        pods = await _running(engine, 2, peer_exit_s=0.1, collective_timeout_s=30, in_job_restarts=1,
                              in_job_restart_s=0.1, hang_detect_s=0.4)
        engine.workloads.collectives.hang(*engine.workloads.rank("default", pods[1]["name"]))
        step = _job(engine)["step"]
        await wait_until(lambda: _job(engine)["step"] > step, timeout=3, what="training again after the detection")
        assert not _exit_codes(engine), "the launcher restarted the workers in place: no container exited"
        assert engine.workloads.collectives.status(("default", "train"))["hung_ranks"] == 0


async def test_a_slow_rank_sets_the_pace_of_every_step() -> None:
    async with running_engine() as engine:
        pods = await _running(engine, 2)
        collectives, job = engine.workloads.collectives, ("default", "train")
        assert collectives.step_share(job) == 1.0
        collectives.slow(job, ("default", pods[0]["name"]), 4.0, 60)
        collectives.slow(job, ("default", pods[1]["name"]), 2.0, 60)
        assert collectives.step_share(job) == 0.25
        collectives.slow(job, ("default", pods[0]["name"]), 4.0, 0.0)  # over
        assert collectives.step_share(job) == 0.5


async def test_silent_data_corruption_found_late_resumes_from_the_checkpoint_before_the_last() -> None:
    async with running_engine(fast_config(checkpoint_every_steps=5)) as engine:
        await _running(engine, 1)
        await wait_until(lambda: _job(engine)["checkpointed_step"] >= 10, what="two checkpoints")
        engine.workloads.discard_checkpoints(("default", "train"), 1)
        assert _job(engine)["checkpointed_step"] % 5 == 0
        checkpointed = _job(engine)["checkpointed_step"]
        pod = _ready(engine, 1)
        assert pod is not None
        engine.crash_pod("default", pod[0]["name"], exit_code=1)
        assert _job(engine)["step"] == checkpointed, "the restart resumes from the older checkpoint"


async def test_the_job_controllers_back_off_has_its_own_ceiling() -> None:
    """kubernetes.io "Jobs": 10 s doubling to 6 minutes, beside the kubelet's crash-loop cap of 5 minutes."""
    timings = FAST.model_copy(update={"backoff_base_s": 10, "backoff_max_s": 300, "job_backoff_max_s": 360})
    async with running_engine(fast_config(timings=timings)) as engine:
        key = ("default", "train")
        engine.jobs._failed_at[key] = engine.timers.now()
        assert 359 < engine.jobs._replacement_delay(key, failed=10) <= 360
        assert 39 < engine.jobs._replacement_delay(key, failed=3) <= 40


async def test_a_jobsets_pods_show_the_jobsets_step_which_stands_while_a_rank_hangs() -> None:
    # A JobSet of one-pod Jobs is one synchronous job (each step needs every rank): what its pods report in
    # podmedic.io/progress is the JobSet's step, so a rank's hang stops every pod's progress, as it stops the
    # trainer's; the Jobs keep no step count of their own that would move on meanwhile.
    async with running_engine(fast_config(timings=FAST.model_copy(update={"progress_write_s": 0.05}))) as engine:
        engine.create_training_job("train", parallelism=2, jobset=True, collectives={"collective_timeout_s": 600})

        def ranks() -> list[dict[str, Any]] | None:
            pods = [p for p in engine.state()["pods"] if p.get("jobset") == "train" and p["ready"]]
            return pods if len(pods) == 2 else None

        pods = await wait_until(ranks, what="both ranks Ready")
        await wait_until(lambda: _job(engine)["step"] >= 3, what="steps")

        def shown() -> set[str]:
            return {(engine.store.get("pods", "default", p["name"])["metadata"].get("annotations") or {})
                    .get("podmedic.io/progress", "") for p in pods}

        await wait_until(lambda: shown() == {str(_job(engine)["step"])}, what="the JobSet's step on both pods")
        engine.workloads.collectives.hang(*engine.workloads.rank("default", pods[1]["name"]))
        await asyncio.sleep(0.5)  # what must not happen meanwhile has no condition to wait for
        before = shown()
        await asyncio.sleep(0.5)
        assert shown() == before and len(before) == 1, "a pod's progress moved while a rank hung"
        assert not any(j["training"] for j in engine.state()["jobs"] if j["name"].startswith("train-"))


async def test_a_leaderworkerset_group_steps_as_one_job_and_stands_while_its_worker_hangs() -> None:
    # A LeaderWorkerSet group shards one model over its leader and workers (kubernetes-sigs/lws README:
    # multi-host inference, "sharded and run across multiple devices on multiple nodes"), so a step needs
    # every pod of the group: the leader's progress stands while a worker hangs. Another group is another
    # replica of the model and steps on.
    async with running_engine(fast_config(timings=FAST.model_copy(update={"progress_write_s": 0.05}))) as engine:
        template = engine.create_training_job("proto", parallelism=0, prefer_node_label=False,
                                              collectives={"collective_timeout_s": 600})["spec"]["template"]
        template["spec"]["restartPolicy"] = "Always"
        engine.store.create("leaderworkersets", {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "ws",
                                                                                              "namespace": "default"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template}}})

        def groups() -> dict[str, dict[str, Any]] | None:
            found = {j["name"]: j for j in engine.state()["jobs"] if j.get("leaderworkerset") == "ws"}
            return found if len(found) == 2 and all(j["step"] >= 3 for j in found.values()) else None

        first = await wait_until(groups, what="both groups stepping")
        engine.workloads.collectives.hang(*engine.workloads.rank("default", "ws-0-1"))
        await asyncio.sleep(0.5)  # what must not happen meanwhile has no condition to wait for
        before = groups() or first
        await asyncio.sleep(0.5)
        after = groups() or first
        assert after["ws-0"]["step"] == before["ws-0"]["step"] and after["ws-0"]["hung_ranks"] == 1, after
        assert after["ws-1"]["step"] > before["ws-1"]["step"], "the other group stood still too"
        leader = engine.store.get("pods", "default", "ws-0")["metadata"]["annotations"]
        assert leader.get("podmedic.io/progress") == str(after["ws-0"]["step"]), leader
