"""End to end on the dev server and the simulator over HTTP: in dry run the worker writes nothing to
the cluster (audit recorder) while the incident records every decision it would have taken."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import IncidentState, Phase
from podmedic.domain.models import Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from podmedic_sim.audit import tapped
from tests.e2e_guard.stack import DRIVER, DRIVERS, fail, sim, stack, state, writes
from tests.helpers import assert_eventually

__all__ = ["sim"]
pytestmark = pytest.mark.asyncio(loop_scope="session")
DRY_RUN = parse_policy("guard: {dry_run: true}\n" + DRIVERS)


@pytest_asyncio.fixture(loop_scope="session")
async def dry_stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async for client in stack(dev_env, sim, DRY_RUN, task_queue):
        yield client


async def test_dry_run_writes_nothing_and_records_every_decision(sim: SimCluster, dry_stack: Client) -> None:
    client = dry_stack
    rules_before = len(sim.state()["taint_rules"])
    device = ("node-0001", "gpu-3")
    with tapped() as during:
        fail(sim, [device], "79")

        async def closed() -> IncidentState:
            try:
                now = await state(client, *device)
            except RPCError as err:
                raise AssertionError(str(err)) from err
            assert now.phase is Phase.CLOSED, now.phase
            return now
        final = await assert_eventually(closed, timeout=90)
    assert writes(during) == []
    assert any(a.component == "worker" for _, a in during), "the worker's reads were not recorded"
    assert len(sim.state()["taint_rules"]) == rules_before
    lines = [t.message for t in final.timeline]
    assert any(m.startswith(f"dry-run: would taint {DRIVER}/node-0001/gpu-3 NoExecute") for m in lines), lines
    assert any(m.startswith("dry-run: the fleet guard would") for m in lines), lines
    assert any(m.startswith(f"{Outcome.DRY_RUN.value}: dry run of {DRIVER}") for m in lines), lines
