"""End to end on the dev server and the simulator over HTTP: DeviceTaintRules held by runs terminated from
Temporal are swept by the fleet guard, and the device's health decides what becomes of a rule nobody holds.

Terminate runs none of an incident's code, so the run stays in the rule's ``podmedic.io/holders`` (the
ownership record of ``activities/holders.py``). The rule's shape (``spec.deviceSelector`` with driver,
pool and device; ``spec.taint``) is KEP-5055's ``DeviceTaintRule``; the device's health is read as the
worker reads it (a pod's KEP-4680 ``allocatedResourcesStatus``, else the driver's own ResourceSlice
taints): here the driver's slice taint, since no pod uses the device.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus

from activities import holders
from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.e2e_guard.stack import DRIVER, fail, sim, stack, target
from tests.helpers import KUBECTL, assert_eventually
from workers.cli.guard import fetch_status

__all__ = ["sim"]
pytestmark = pytest.mark.asyncio(loop_scope="session")
SWEEPING = parse_policy("""
guard:
  max_driver_share: 1
  max_pool_share: 1
  reclaim_s: 5
  sweep_s: 1
  sweep_grace_s: 3
  storm: {enabled: false}
drivers:
  default:
    checkpoint: {timeout_s: 5, poll_s: 0.2}
    close: {heal_wait_s: 600, anti_flap_s: 1, poll_s: 0.5}
    ticket: {backend: none}
    detection: {slice_taints: {"gpu.nvidia.com/xid": by_code}}
    classification: {codes: {permanent: [79]}}
""")
SWEPT_SEVERAL_TIMES_S = 8.0
"""The grace (3 s) and several sweeps (every 1 s)."""
"""XID 31 is in no table: transient by default, so its incident holds the rule while it waits up to
``heal_wait_s`` for the device to heal, a stage that lasts. XID 79 is permanent: with no ticket backend its
incident closes at once, keeping the rule for an operator."""


@pytest_asyncio.fixture(loop_scope="session")
async def sweep_stack(dev_env: object, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async for client in stack(dev_env, sim, SWEEPING, task_queue):  # type: ignore[arg-type]
        yield client


async def rule_of(sim: SimCluster, pool: str, device: str) -> dict[str, Any] | None:
    """The DeviceTaintRule podmedic made for the device (named by ``DeviceRef.object_name``), as kubectl reads
    it from the simulator's API (run beside the worker: this loop is the worker's too)."""
    name = DeviceRef(driver=DRIVER, pool=pool, device=device).object_name
    kubectl = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(sim.kubeconfig_path), "get",
        "devicetaintrules", name, "-o", "json", "--ignore-not-found",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await kubectl.communicate()
    assert kubectl.returncode == 0, err.decode()
    return json.loads(out) if out.strip() else None


async def holders_on(sim: SimCluster, pool: str, device: str) -> list[str]:
    rule = await rule_of(sim, pool, device)
    assert rule is not None, "no rule"
    return list(json.loads(rule["metadata"]["annotations"][holders.HOLDERS]))


async def held_by_one(sim: SimCluster, pool: str, device: str, workflow_id: str, not_by: str = "") -> str:
    """Wait until one run of ``workflow_id`` other than ``not_by`` alone holds the device's rule; that run."""
    async def one() -> str:
        now = await holders_on(sim, pool, device)
        assert len(now) == 1 and now[0] != not_by and now[0].split("@", 1)[0] == workflow_id, now
        return now[0]
    return await assert_eventually(one, timeout=60)


async def test_terminated_holders_are_swept_and_deliberate_holds_are_not(sim: SimCluster,
                                                                         sweep_stack: Client) -> None:
    client, pool, device = sweep_stack, "node-0001", "gpu-3"
    workflow_id = f"device/{DRIVER}/{pool}/{device}"
    fail(sim, [(pool, device)], "31")
    first = await held_by_one(sim, pool, device, workflow_id)
    await client.get_workflow_handle(workflow_id).terminate(reason="e2e: Terminate while it waits to heal")

    # The driver's slice taint still says Unhealthy: a new run of the incident takes the rule over.
    second = await held_by_one(sim, pool, device, workflow_id, not_by=first)
    status = await fetch_status(target(client))
    assert any("reads Unhealthy" in line and "opened to take it over" in line for line in status.history), \
        status.history
    reopened = await client.get_workflow_handle(workflow_id, run_id=second.split("@", 1)[1]).describe()
    assert reopened.status is WorkflowExecutionStatus.RUNNING

    # Terminated again, and the driver's taint gone within the grace: nothing can see the device, so the
    # rule stays, held by nobody, and no incident opens.
    await client.get_workflow_handle(workflow_id).terminate(reason="e2e: Terminate again")
    sim.set_slice_taint(DRIVER, pool, device, "gpu.nvidia.com/xid", remove=True)

    async def orphaned() -> None:
        rule = await rule_of(sim, pool, device)
        assert rule is not None, "a rule whose device nobody can see was dropped"
        notes = rule["metadata"]["annotations"]
        assert json.loads(notes[holders.HOLDERS]) == [] and notes.get(holders.ORPHANED_FROM) == second, notes
        assert "rule sweeper" in notes[holders.CHANGED_BY] and "terminated" in notes[holders.REASON], notes
    await assert_eventually(orphaned, timeout=60)
    status = await fetch_status(target(client))
    assert any("reads Unknown" in line and "kept" in line for line in status.history), status.history
    latest = await client.get_workflow_handle(workflow_id).describe()
    assert latest.run_id == second.split("@", 1)[1], "an incident was opened for a device nobody reads Unhealthy"

    # A permanent failure with no ticket backend closes at once, keeping the rule for an operator: a
    # deliberate hold, which sweeping would turn into a new incident every sweep. (One test: the guard is one
    # per namespace, bound to the task queue of the stack that started it.)
    pool, device = "node-0000", "gpu-1"
    workflow_id = f"device/{DRIVER}/{pool}/{device}"
    fail(sim, [(pool, device)], "79")
    holder = await held_by_one(sim, pool, device, workflow_id)
    result = await client.get_workflow_handle(workflow_id).result()
    assert "kept for an operator" in result["explanation"], result
    await asyncio.sleep(SWEPT_SEVERAL_TIMES_S)
    assert await holders_on(sim, pool, device) == [holder]
    assert (await client.get_workflow_handle(workflow_id).describe()).run_id == holder.split("@", 1)[1]
