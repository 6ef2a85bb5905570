"""A node that dies and comes back (``podmedic_sim/node_lifecycle.py``, ``KubeletPods.node_down``).

Sources of the expected shapes: kubernetes/kubernetes ``pkg/controller/nodelifecycle`` (after
``--node-monitor-grace-period`` without a kubelet status the node's ``Ready`` condition is ``Unknown``
with reason ``NodeStatusUnknown``, the node is tainted ``node.kubernetes.io/unreachable`` NoSchedule and
NoExecute, its pods' ``Ready`` turns False); ``pkg/controller/tainteviction`` (a pod is deleted when its
toleration of the NoExecute taint runs out, with ``DisruptionTarget``/``DeletionByTaintManager``; the
API server's ``DefaultTolerationSeconds`` gives every pod 300 s); ``pkg/controller/job`` ``isPodFailed``
(a deleted pod that did not succeed counts as failed at once unless the Job only replaces Failed pods);
a graceful deletion completes only when the kubelet confirms it, so a lost node's pods stay Terminating.
"""

from __future__ import annotations

from typing import Any

import pytest

from podmedic_sim.engine import SimEngine
from podmedic_sim.node_lifecycle import UNREACHABLE
from podmedic_sim.topology import node_name
from tests.simkit import running_engine, wait_until


def _pod(engine: SimEngine, name: str) -> dict[str, Any] | None:
    return engine.store.find("pods", "default", name)


def _ready_condition(obj: dict[str, Any]) -> str | None:
    return next((c["status"] for c in obj.get("status", {}).get("conditions") or [] if c["type"] == "Ready"), None)


def _bare_pod(node: str, toleration: dict[str, str]) -> dict[str, Any]:
    """Pod ``p`` bound to ``node`` (restartPolicy Always), tolerating the unreachable taint for ever."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}], "tolerations": [toleration]}}


def _training_pods(engine: SimEngine) -> list[dict[str, Any]]:
    return [p for p in engine.store.iter("pods", "default") if p["metadata"]["name"].startswith("train")]


async def test_a_dead_nodes_pod_stays_bound_is_evicted_when_its_toleration_runs_out_and_is_replaced() -> None:
    async with running_engine() as engine:
        engine.create_training_job("train", parallelism=1)
        first = await wait_until(lambda: next((p for p in _training_pods(engine) if _ready_condition(p) == "True"),
                                              None), what="the rank Ready")
        name, node = first["metadata"]["name"], first["spec"]["nodeName"]
        tolerated = [t for t in first["spec"]["tolerations"] if t["key"] == UNREACHABLE]
        assert tolerated and tolerated[0]["tolerationSeconds"] == 300, "DefaultTolerationSeconds admitted it"

        engine.nodes.set_down(node, True)
        engine.nodes.set_down(node, True)  # a second fault of the dead node changes nothing
        pod = _pod(engine, name)
        assert pod is not None and _ready_condition(pod) == "True" and pod["status"]["phase"] == "Running", \
            "until the grace period runs out the API still shows the pod as it was"
        await wait_until(lambda: _ready_condition(engine.store.get("nodes", None, node)) == "Unknown",
                         what="the node Unknown")
        lost = engine.store.get("nodes", None, node)
        assert {(t["key"], t["effect"]) for t in lost["spec"]["taints"]} == {
            (UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
        assert next(c for c in lost["status"]["conditions"] if c["type"] == "Ready")["reason"] == "NodeStatusUnknown"
        assert _ready_condition(engine.store.get("pods", "default", name)) == "False"

        evicted = await wait_until(lambda: (p := _pod(engine, name)) and "deletionTimestamp" in p["metadata"] and p,
                                   what="the taint eviction")
        assert any(c["type"] == "DisruptionTarget" and c["reason"] == "DeletionByTaintManager"
                   for c in evicted["status"]["conditions"])
        job = await wait_until(lambda: (j := engine.store.get("jobs", "default", "train")).get("status", {})
                               .get("failed") and j, what="the Job counting the Terminating pod failed")
        assert job["status"]["failed"] == 1
        replacement = await wait_until(lambda: next(
            (p for p in _training_pods(engine) if p["metadata"]["name"] != name and _ready_condition(p) == "True"),
            None), timeout=10, what="a replacement Ready elsewhere")
        assert replacement["spec"]["nodeName"] != node
        assert _pod(engine, name) is not None, "no kubelet confirms the deletion: Terminating until the node is back"

        engine.nodes.set_down(node, False)
        await wait_until(lambda: _pod(engine, name) is None, what="the deletion finished by the rebooted kubelet")
        back = engine.store.get("nodes", None, node)
        assert _ready_condition(back) == "True" and not back["spec"].get("taints")


async def test_a_pod_bound_to_a_dead_node_before_it_is_tainted_waits_and_starts_when_it_is_back() -> None:
    async with running_engine() as engine:
        node = node_name(0)
        engine.nodes.set_down(node, True)
        engine.store.create("pods", _bare_pod(node, {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}))
        await wait_until(lambda: _ready_condition(engine.store.get("nodes", None, node)) == "Unknown",
                         what="the node Unknown")
        pod = engine.store.get("pods", "default", "p")
        assert pod.get("status", {}).get("phase", "Pending") == "Pending" and "deletionTimestamp" not in pod["metadata"]
        engine.nodes.set_down(node, False)
        await wait_until(lambda: engine.store.get("pods", "default", "p").get("status", {}).get("phase") == "Running",
                         what="the pod started by the node's kubelet once back")


async def test_a_container_that_died_with_its_node_restarts_by_its_policy_when_the_node_is_back() -> None:
    async with running_engine() as engine:
        node = node_name(1)
        engine.store.create("pods", _bare_pod(node, {"key": UNREACHABLE, "operator": "Exists"}))
        await wait_until(lambda: engine.store.get("pods", "default", "p").get("status", {}).get("phase") == "Running",
                         what="running")
        engine.nodes.set_down(node, False)  # the return of a live node changes nothing
        engine.nodes.set_down(node, True)
        engine.nodes.set_down(node, False)

        def restarted() -> dict[str, Any] | None:
            status = engine.store.get("pods", "default", "p")["status"]["containerStatuses"][0]
            return status if status["restartCount"] == 1 and "running" in status["state"] else None

        status = await wait_until(restarted, what="restarted (restartPolicy Always)")
        assert status["lastState"]["terminated"]["exitCode"] == 255


async def test_an_unknown_node_is_refused() -> None:
    async with running_engine() as engine:
        with pytest.raises(KeyError, match="node-999"):
            engine.nodes.set_down("node-999", True)
