"""A JobSet that restarts in place (``podmedic_sim/in_place_restart.py``).

Sources of the expected shapes: kubernetes-sigs/jobset ``keps/467-InPlaceRestart`` ("recover from failures
by restarting the healthy Pods in-place and recreating the Failed Pods"), ``pkg/controllers/
in_place_restart.go`` (all pods at one attempt make it ``status.currentInPlaceRestartAttempt``; otherwise
``previousInPlaceRestartAttempt`` becomes the highest minus one; a container restarted more than
``maxRestarts`` times fails the JobSet with ``ReachedMaxRestarts``), ``cmd/in-place-restart-agent/main.go``
(the pod annotation ``jobset.sigs.k8s.io/in-place-restart-attempt``: 0 at first, the current attempt + 1
after; exit 1 when the previous attempt reaches its own) and the example manifest
``site/static/examples/in-place-restart/jobset-main-container-mode.yaml``.
"""

from __future__ import annotations

from typing import Any

from podmedic_sim.engine import SimEngine
from podmedic_sim.in_place_restart import ATTEMPT
from tests.simkit import running_engine, wait_until


def _jobset(engine: SimEngine) -> dict[str, Any]:
    return engine.store.get("jobsets", "default", "train")


def _status(engine: SimEngine) -> dict[str, Any]:
    return _jobset(engine).get("status") or {}


def _pods(engine: SimEngine) -> list[dict[str, Any]]:
    return sorted((p for p in engine.store.list("pods", "default") if p["metadata"]["name"].startswith("train-")
                   and (p.get("status") or {}).get("phase") != "Failed" and "deletionTimestamp" not in p["metadata"]),
                  key=lambda p: p["metadata"]["name"])


def _restarts(pod: dict[str, Any]) -> int:
    return sum(int(s.get("restartCount") or 0) for s in (pod.get("status") or {}).get("containerStatuses") or [])


def _step(engine: SimEngine) -> int:
    return int(next(j for j in engine.state()["jobs"] if j["name"] == "train")["step"])


async def _training(engine: SimEngine, max_restarts: int = 10, peer_exit: bool = True) -> list[dict[str, Any]]:
    engine.create_training_job("train", parallelism=2, jobset=True, in_place_restart=True, backoff_limit=max_restarts,
                               collectives={"peer_exit_s": 0.2} if peer_exit else {})
    await wait_until(lambda: _status(engine).get("currentInPlaceRestartAttempt") == 0, what="the barrier lifted")
    step = _step(engine)
    await wait_until(lambda: _step(engine) > step + 2, what="steps")
    pods = _pods(engine)
    assert [p["metadata"]["annotations"][ATTEMPT] for p in pods] == ["0", "0"]
    return pods


async def test_a_crashed_rank_and_its_peers_restart_in_place_and_train_again() -> None:
    async with running_engine() as engine:
        pods = await _training(engine)
        engine.crash_pod("default", pods[0]["metadata"]["name"], exit_code=1)
        await wait_until(lambda: _status(engine).get("currentInPlaceRestartAttempt") == 1, what="attempt 1")
        after = _pods(engine)
        assert [p["metadata"]["uid"] for p in after] == [p["metadata"]["uid"] for p in pods], "no pod recreated"
        assert all(_restarts(p) >= 1 for p in after) and _status(engine).get("restarts", 0) == 0
        step = _step(engine)
        await wait_until(lambda: _step(engine) > step + 2, what="training again")


async def test_a_rank_replaced_alone_brings_its_peers_to_the_next_attempt_in_place() -> None:
    # What podmedic does for a rank on a failed GPU: the pod ends, the Job recreates it alone
    # (podReplacementPolicy Failed, backoffLimit MaxInt32); the healthy rank restarts in place. Its trainer
    # declares no peer timeout (it would wait for ever): the agent alone restarts it, as for a hung rank.
    async with running_engine() as engine:
        pods = await _training(engine, peer_exit=False)
        engine.delete_pod("default", pods[0]["metadata"]["name"], grace_seconds=0)
        await wait_until(lambda: _status(engine).get("currentInPlaceRestartAttempt") == 1, what="attempt 1")
        after = _pods(engine)
        assert after[0]["metadata"]["uid"] != pods[0]["metadata"]["uid"], "the ended rank was replaced"
        assert after[1]["metadata"]["uid"] == pods[1]["metadata"]["uid"] and _restarts(after[1]) >= 1
        assert _status(engine).get("restarts", 0) == 0, "the JobSet was not recreated"
        step = _step(engine)
        await wait_until(lambda: _step(engine) > step + 2, what="training again")


async def test_a_rank_on_a_broken_gpu_restarts_in_place_on_it_until_the_jobset_fails() -> None:
    async with running_engine() as engine:
        pods = await _training(engine, max_restarts=2)
        claim = pods[0]["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        alloc = engine.store.get("resourceclaims", "default", claim)["status"]["allocation"]["devices"]["results"][0]
        engine.set_device_health(alloc["driver"], alloc["pool"], alloc["device"], "Unhealthy", code=79, crash=True)

        def again_in_place() -> bool:
            same = [p for p in _pods(engine) if p["metadata"]["uid"] == pods[0]["metadata"]["uid"]]
            return bool(same) and _restarts(same[0]) >= 2

        await wait_until(again_in_place, timeout=15, what="the rank restarted in place on its GPU, twice")
        failed = await wait_until(lambda: next((c for c in _status(engine).get("conditions") or []
                                                if c["type"] == "Failed"), None), timeout=15, what="JobSet failed")
        assert failed["reason"] == "ReachedMaxRestarts"
        # A finished JobSet deletes its active Jobs (jobset_controller.go, jobSetFinished), their pods with them.
        await wait_until(lambda: not engine.store.list("jobs", "default"), what="the Jobs deleted")
