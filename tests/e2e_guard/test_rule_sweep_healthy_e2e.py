"""End to end: a DeviceTaintRule left with no holder goes once a source that can see its device reads it
Healthy, and only then.

A training pod runs on the device when it fails; the incident fences it (NoSchedule, which leaves running
pods where they are: KEP-5055) and waits at its NoExecute approval gate, where it is terminated from
Temporal. The pod's KEP-4680 ``allocatedResourcesStatus`` is the source that sees the device: while it
says Unhealthy the sweep opens the incident again; the device repaired and the new run terminated too,
the status says Healthy and the sweep deletes the rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError

from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.e2e_guard.stack import sim, stack, target
from tests.e2e_guard.test_rule_sweep_e2e import held_by_one, rule_of
from tests.helpers import assert_eventually, wait_until
from workers.cli.guard import fetch_status

__all__ = ["sim"]
pytestmark = pytest.mark.asyncio(loop_scope="session")
GATED = parse_policy("""
guard:
  max_driver_share: 1
  max_pool_share: 1
  sweep_s: 1
  sweep_grace_s: 0
  storm: {enabled: false}
drivers:
  default:
    repeat_offenders: {incidents: 0}
    checkpoint: {timeout_s: 5, poll_s: 0.2}
    close: {heal_wait_s: 600, anti_flap_s: 1, poll_s: 0.5}
    ticket: {backend: none}
    approvals: {gates: [{action: taint_no_execute}], timeout_s: 900, on_timeout: abort}
  gpu.nvidia.com:
    detection: {corroborate_s: 0}
    checkpoint: {timeout_s: 5}
    classification: {unknown_code_permanence: permanent}
""")
"""Pod status carries no XID code: an Unhealthy report with none is a permanent failure here, fenced
NoSchedule, checkpointed, then held at the NoExecute gate with its pod still running on the device."""


@pytest_asyncio.fixture(loop_scope="session")
async def gated_stack(dev_env: object, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async for client in stack(dev_env, sim, GATED, task_queue):  # type: ignore[arg-type]
        yield client


def _ready_pod(sim: SimCluster, job: str) -> dict[str, Any] | None:
    pods = [p for p in sim.state()["pods"] if p.get("job") == job and p.get("ready")]
    return pods[0] if pods else None


async def test_a_rule_nobody_holds_goes_when_its_device_reads_healthy(sim: SimCluster, gated_stack: Client) -> None:
    client = gated_stack
    sim.call(lambda: sim.engine.create_training_job("sweep-train"))
    pod = await asyncio.to_thread(wait_until, lambda: _ready_pod(sim, "sweep-train"), timeout=60,
                                  what="a Ready pod of sweep-train")
    driver, pool, device = pod["devices"][0].split("/")
    workflow_id = f"device/{driver}/{pool}/{device}"
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=94, message="XID 94")

    async def gated() -> None:
        try:
            state = await client.get_workflow_handle(workflow_id).query("get_state")
        except RPCError as err:  # not open yet
            raise AssertionError(str(err)) from err
        assert state["pending_approval"] is not None, (state["phase"], [t["message"][:150] for t in state["timeline"]])
    await assert_eventually(gated, timeout=90)
    first = await held_by_one(sim, pool, device, workflow_id)
    await client.get_workflow_handle(workflow_id).terminate(reason="e2e: Terminate at the NoExecute gate")

    # The pod still reports the device Unhealthy: the sweep opens the incident again, which takes the rule.
    second = await held_by_one(sim, pool, device, workflow_id, not_by=first)
    await assert_eventually(gated, timeout=90)

    # Repaired, and the new run terminated: the pod's status now reads it Healthy, so the rule goes.
    sim.set_device_health(driver, pool, device, "Healthy")
    await client.get_workflow_handle(workflow_id).terminate(reason="e2e: Terminate after the repair")

    async def deleted() -> None:
        assert await rule_of(sim, pool, device) is None
    await assert_eventually(deleted, timeout=60)
    status = await fetch_status(target(client))
    assert any("deleted: no holder" in line and "reads Healthy" in line and "allocatedResourcesStatus" in line
               for line in status.history), status.history
    assert (await client.get_workflow_handle(workflow_id).describe()).run_id == second.split("@", 1)[1]
