"""A Job's podFailurePolicy and podReplacementPolicy, as the Job controller applies them.

Source: kubernetes/kubernetes ``pkg/controller/job/pod_failure_policy.go`` (the first matching rule
decides: ``FailJob``, ``Ignore`` or ``Count``; ``onExitCodes`` with ``In``/``NotIn``; ``onPodConditions``
such as the ``DisruptionTarget`` an eviction sets) and ``pkg/apis/batch/v1/defaults.go``
(``podReplacementPolicy`` defaults to ``Failed`` with a podFailurePolicy: no replacement while the old
pod is Terminating); kubernetes.io "Handling retriable and non-retriable pod failures with Pod failure
policy".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podmedic.domain.base import Obj
from podmedic_sim.engine import SimEngine
from tests.simkit import FAST, fast_config, gpu_pod, gpu_template, running_engine, wait_until

IGNORE_DISRUPTIONS = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
FAIL_ON_42 = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}


def _job(name: str, backoff_limit: int, **spec: Any) -> dict[str, Any]:
    pod = gpu_pod("unused", restart_policy="Never")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"parallelism": 1, "backoffLimit": backoff_limit, **spec,
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]}}}


def _pods(engine: SimEngine) -> list[Obj]:
    return [p for p in engine.store.list("pods", "default")
            if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == "j"]


def _live(engine: SimEngine) -> list[Obj]:
    return [p for p in _pods(engine) if p.get("status", {}).get("phase") not in ("Failed", "Succeeded")
            and "deletionTimestamp" not in p["metadata"]]


def _status(engine: SimEngine) -> dict[str, Any]:
    status: dict[str, Any] = engine.store.get("jobs", "default", "j").get("status") or {}
    return status


async def _running(engine: SimEngine) -> Obj:
    (pod,) = await wait_until(lambda: _live(engine), what="the pod")
    await wait_until(lambda: (rt := engine.kubelet.pods.get(("default", pod["metadata"]["name"]))) and rt.ready(),
                     what="Ready")
    return pod


@pytest.mark.parametrize(("rules", "failed"), [([IGNORE_DISRUPTIONS], 0), ([], 1)])
async def test_an_evicted_pod_is_ignored_where_the_policy_says_so_and_counted_where_not(
        rules: list[dict[str, Any]], failed: int) -> None:
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        engine.store.create("jobs", _job("j", 6, podFailurePolicy={"rules": rules}) if rules else _job("j", 6))
        pod = await _running(engine)
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        engine.evict("default", name)
        await wait_until(lambda: engine.store.find("pods", "default", name) is None, what="the evicted pod gone")
        await wait_until(lambda: [p for p in _live(engine) if p["metadata"]["uid"] != uid], what="the replacement")
        await asyncio.sleep(0.3)  # the controller's pass after the pod went (job_requeue_s is 0.01 s here)
        assert _status(engine).get("failed", 0) == failed


async def test_a_failjob_rule_fails_the_job_at_once() -> None:
    async with running_engine() as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        engine.store.create("jobs", _job("j", 6, podFailurePolicy={"rules": [FAIL_ON_42]}))
        pod = await _running(engine)
        rt = engine.kubelet.pods[("default", pod["metadata"]["name"])]
        engine.kubelet.exit_container(rt, rt.containers[0], 42)
        failed = await wait_until(lambda: [c for c in _status(engine).get("conditions") or []
                                           if c["type"] == "Failed" and c["status"] == "True"], what="Job Failed")
        assert failed[0]["reason"] == "PodFailurePolicy" and "exit code 42" in failed[0]["message"]


async def test_with_a_failure_policy_a_replacement_waits_until_the_old_pod_is_gone() -> None:
    slow_exit = fast_config(timings=FAST.model_copy(update={"termination_grace_s": 1.0}))
    async with running_engine(slow_exit) as engine:
        engine.store.create("resourceclaimtemplates", gpu_template())
        engine.store.create("jobs", _job("j", 6, podFailurePolicy={"rules": [IGNORE_DISRUPTIONS]}))
        pod = await _running(engine)
        engine.delete_pod("default", pod["metadata"]["name"])
        await wait_until(lambda: _status(engine).get("terminating") == 1, what="Terminating")
        assert _live(engine) == [], "no replacement while the old pod is Terminating (podReplacementPolicy Failed)"
        await wait_until(lambda: _live(engine), timeout=10, what="the replacement once it is gone")
