"""End to end on the dev server and the simulator over HTTP: a storm trips the fleet guard and the
audit recorder sees no disruptive write while it is tripped; an operator's resume lets them through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.fleet_guard.messages import GuardStatus, ResumeRequest
from podmedic.domain.incident import Phase
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from podmedic_sim.audit import UNSCOPED, tapped
from tests.e2e_guard.stack import DRIVERS, disruptive, fail, sim, stack, state, target
from tests.helpers import assert_eventually, sim_node
from workers.cli.guard import fetch_status, render, resume
from workflows.fleet.incident import FleetIncidentWorkflow

__all__ = ["sim"]
pytestmark = pytest.mark.asyncio(loop_scope="session")
STORM = parse_policy("""
guard:
  max_driver_share: 1
  max_pool_share: 1
  retry_s: 2
  storm: {share: 0.3, window_s: 300, min_devices: 3, clear_s: 3600}
""" + DRIVERS)


@pytest_asyncio.fixture(loop_scope="session")
async def storm_stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async for client in stack(dev_env, sim, STORM, task_queue):
        yield client


async def test_while_tripped_nothing_disruptive_reaches_the_cluster(sim: SimCluster, storm_stack: Client) -> None:
    client = storm_stack
    failed = [("node-0000", "gpu-0"), ("node-0000", "gpu-1"), ("node-0001", "gpu-0"), ("node-0001", "gpu-1")]
    fail(sim, failed, "31")  # 4 of 8 GPUs at once: no hardware does that

    async def tripped() -> GuardStatus:
        try:
            status = await fetch_status(target(client))
        except Exception as err:  # no guard yet
            raise AssertionError(str(err)) from err
        assert status.state == "tripped", status
        return status

    status = await assert_eventually(tripped, timeout=60)
    assert status.storm is not None and status.storm.fleet == 8 and status.storm.unhealthy >= 3
    async def all_held() -> None:
        phases = [(await state(client, *d)).phase for d in failed]
        assert phases.count(Phase.THROTTLED) >= len(failed) - 2, phases  # the first two may hold permits
    # Recording starts once they are held: a fence allowed just before the guard tripped may still
    # be on its way to the API server when the trip is first seen.
    await assert_eventually(all_held, timeout=60)
    with tapped() as during:
        await asyncio.sleep(6)  # three retry_s rounds of asking again
        record = client.get_workflow_handle_for(FleetIncidentWorkflow.run, status.storm.fleet_incident)
        assert (await record.describe()).status == WorkflowExecutionStatus.RUNNING
        held = await fetch_status(target(client))
        text = render(held)
        print(text)  # docs/guard.md shows this output
        assert text.startswith("fleet guard: TRIPPED") and status.storm.fleet_incident in text
        assert f"{len(held.waiting)} incident(s) wait for a permit, the oldest since " in text, text
        assert all(f"  waits  {i} since " in text for i in held.waiting), text
        rules_while_tripped = len(sim.state()["taint_rules"])
        assert held.state == "tripped"
        # Held incidents may ask the cluster nothing at all in this span; a read of our own shows
        # the recorder is on, so that "no disruptive write" below means something.
        await asyncio.to_thread(sim_node, sim, "node-0000")
    assert any(a.component == UNSCOPED for _, a in during), "the audit recorder saw nothing: is it on?"
    assert disruptive(during) == []
    assert rules_while_tripped <= 2
    await resume(target(client), ResumeRequest(by="e2e", reason="storm was a test"))
    assert "resumed by e2e" in await asyncio.wait_for(record.result(), timeout=30)

    async def all_tainted() -> None:
        assert len(sim.state()["taint_rules"]) == len(failed)
    await assert_eventually(all_tainted, timeout=60)
