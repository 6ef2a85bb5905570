"""Job controller: pod creation, replacement of failed or deleted pods, backoffLimit."""

from __future__ import annotations

from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.engine import SimEngine
from tests.simkit import gpu_pod, gpu_template, running_engine, wait_until


def _job(name: str, parallelism: int, backoff_limit: int) -> dict[str, Any]:
    pod = gpu_pod("unused", restart_policy="Never")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parallelism": parallelism, "backoffLimit": backoff_limit,
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]}}}


def _pods(engine: SimEngine, job: str) -> list[Obj]:
    return [p for p in engine.store.list("pods", "default")
            if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job]


def _live(engine: SimEngine, job: str) -> list[Obj]:
    return [p for p in _pods(engine, job) if p.get("status", {}).get("phase") not in ("Failed", "Succeeded")
            and "deletionTimestamp" not in p["metadata"]]


async def test_job_creates_labelled_owned_pods() -> None:
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        job = engine.store.create("jobs", _job("j", 2, 6))
        await wait_until(lambda: len(_live(engine, "j")) == 2, what="two pods")
        for pod in _pods(engine, "j"):
            meta = pod["metadata"]
            assert meta["name"].startswith("j-") and len(meta["name"]) == len("j-") + 5
            assert meta["labels"]["job-name"] == "j" and meta["labels"]["controller-uid"] == job["metadata"]["uid"]
            assert meta["labels"]["app"] == "j"
            (owner,) = meta["ownerReferences"]
            assert owner["kind"] == "Job" and owner["controller"] is True and owner["uid"] == job["metadata"]["uid"]
        await wait_until(lambda: engine.store.get("jobs", "default", "j").get("status", {}).get("ready") == 2,
                         what="status.ready 2")
        assert engine.store.get("jobs", "default", "j")["status"]["active"] == 2


async def test_deleted_and_failed_pods_are_replaced_and_counted() -> None:
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        engine.store.create("jobs", _job("j", 1, 6))
        (first,) = await wait_until(lambda: _live(engine, "j"), what="first pod")
        engine.delete_pod("default", first["metadata"]["name"])
        await wait_until(lambda: [p for p in _live(engine, "j") if p["metadata"]["uid"] != first["metadata"]["uid"]],
                         what="replacement")
        await wait_until(lambda: engine.store.get("jobs", "default", "j")["status"].get("failed") == 1,
                         what="failed 1")
        second = _live(engine, "j")[0]
        await wait_until(lambda: engine.kubelet.pods.get(("default", second["metadata"]["name"])), what="running")
        rt = engine.kubelet.pods[("default", second["metadata"]["name"])]
        await wait_until(lambda: rt.ready(), what="second ready")
        engine.kubelet.exit_container(rt, rt.containers[0], 2)
        await wait_until(lambda: engine.store.get("jobs", "default", "j")["status"].get("failed") == 2,
                         what="failed 2")
        await wait_until(lambda: len(_live(engine, "j")) == 1, what="replaced again")
        assert len(_pods(engine, "j")) == 2  # the Failed pod stays, the deleted one is gone


async def test_backoff_limit_fails_the_job() -> None:
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        engine.store.create("jobs", _job("j", 1, 0))
        (pod,) = await wait_until(lambda: _live(engine, "j"), what="pod")
        engine.delete_pod("default", pod["metadata"]["name"])

        def failed() -> bool:
            conds = engine.store.get("jobs", "default", "j").get("status", {}).get("conditions") or []
            return any(c["type"] == "Failed" and c["reason"] == "BackoffLimitExceeded" for c in conds)

        await wait_until(failed, what="Job Failed")
        await wait_until(lambda: engine.store.find("pods", "default", pod["metadata"]["name"]) is None, what="gone")
        assert _live(engine, "j") == []


async def test_deleting_the_job_deletes_its_pods() -> None:
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        engine.store.create("jobs", _job("j", 2, 6))
        await wait_until(lambda: len(_live(engine, "j")) == 2, what="two pods")
        engine.store.delete("jobs", "default", "j")
        await wait_until(lambda: _pods(engine, "j") == [], what="pods collected")
