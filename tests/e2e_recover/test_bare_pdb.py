"""A bare pod whose eviction a PodDisruptionBudget refuses: podmedic deletes the replacement it
made (no orphan twin is left gated) and the original keeps running. Also the one scenario that
needs ``delete pods`` in the worker's ClusterRole (tests/deploy/test_rbac_proof.py)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from podmedic_sim import SimCluster
from tests.e2e_recover.conftest import IMAGE, block_node, delete_job, fault, incident, notes, policy, ready_pod
from tests.e2e_recover.test_reschedule import SAME, _pdb, clean  # noqa: F401
from tests.simkit import gpu_pod, gpu_template

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_blocked_bare_pod_keeps_running_and_its_replacement_is_deleted(
        sim: SimCluster, worker: tuple[Client, str]) -> None:
    client, queue = worker
    blocker = await asyncio.to_thread(block_node, sim, "node-0000", 3)
    sim.call(lambda: sim.store.create("resourceclaimtemplates", gpu_template("solo-gpu")))
    body = gpu_pod("solo", template="solo-gpu", image=IMAGE)
    body["metadata"]["labels"] = {"app": "solo"}
    sim.call(lambda: sim.store.create("pods", body))
    pod = await asyncio.to_thread(ready_pod, sim, lambda p: p["name"] == "solo", "the bare pod Ready")
    await asyncio.to_thread(delete_job, sim, blocker)
    _pdb(sim, "solo", 1)
    fault(sim, pod, clears_on_restart=False)
    outcome = await incident(client, queue, pod, policy(SAME, eviction="{retry_s: 0.3, max_wait_s: 1.5}"))
    text = notes(outcome)
    assert outcome.recovered_by is None, text
    assert "would violate the pod's disruption budget" in text and "deleted" in text, text
    names = {p["name"]: p for p in sim.state()["pods"]}
    assert [n for n in names if n.startswith("solo-r")] == [], names.keys()
    assert names["solo"]["uid"] == pod["uid"] and not names["solo"]["deleting"]
