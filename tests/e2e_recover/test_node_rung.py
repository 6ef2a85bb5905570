"""The ladder's last rung end to end: when restarting in place does not help, the device
incident asks its node's watch to quarantine the node, and the node is cordoned and tainted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from podmedic_sim import SimCluster
from tests.e2e_recover.conftest import fault, incident, policy, start_job
from tests.helpers import sim_node, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_node_quarantine_rung_cordons_and_taints_the_node(sim: SimCluster, worker: tuple[Client, str]) -> None:
    client, queue = worker
    _, pod = await start_job(sim)
    fault(sim, pod, clears_on_restart=False)  # a restart does not clear it: the ladder climbs to the node
    rungs = "[{action: in_place_restart, timeout_s: 3}, {action: node_quarantine, timeout_s: 10}]"
    outcome = await incident(client, queue, pod, policy(rungs))
    recover = "\n".join(e.message for e in outcome.timeline if e.step == "recover")
    assert "node_quarantine: node" in recover, recover
    node = pod["node"]

    def quarantined() -> dict[str, Any] | None:
        found = sim_node(sim, node)
        spec = found.get("spec") or {}
        keys = [t.get("key") for t in spec.get("taints") or []]
        return found if spec.get("unschedulable") and "podmedic.io/node-quarantine" in keys else None

    try:
        found = await asyncio.to_thread(wait_until, quarantined, timeout=30, what=f"{node} cordoned and tainted")
        notes = found["metadata"]["annotations"]
        assert notes["podmedic.io/incident"] == f"node/{node}", notes
        assert outcome.recovered_by is None  # quarantining the node is not recovering the workload
    finally:
        await client.get_workflow_handle(f"node/{node}").terminate("test done")
