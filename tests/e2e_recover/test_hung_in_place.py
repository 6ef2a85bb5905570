"""A pod whose workload the checkpoint found hung skips the in-place restart it cannot act on.

A rank stuck in a CUDA call (Llama 3, arXiv 2407.21783 section 3.3.4, "stalled load/store operations";
podmedic_sim/collectives.py) never reads a restart request nor handles SIGTERM: only SIGKILL ends it.
Its own module: each case takes a GPU of the two small nodes, and leaves one tainted.
"""

from __future__ import annotations

import pytest
from temporalio.client import Client

from podmedic_sim import SimCluster
from tests.e2e_recover.conftest import (
    delete_job,
    fault,
    incident,
    notes,
    podmedic_events,
    policy,
    start_job,
    wait_progress,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.parametrize(("in_place", "tried"), [("{mechanism: exit_code}", False),
                                                 ("{mechanism: exec_signal, signal: KILL}", True)])
async def test_a_hung_workload_skips_the_in_place_restart_it_cannot_act_on(
        sim: SimCluster, worker: tuple[Client, str], in_place: str, tried: bool) -> None:
    # A transient XID (94, contained ECC: in no table of this policy, so transient) is otherwise restarted
    # in place first.
    client, queue = worker
    job, pod = await start_job(sim, extra_restart_codes=[137])
    await wait_progress(sim, job, 3)
    sim.call(lambda: sim.engine.workloads.collectives.hang(*sim.engine.workloads.rank("default", pod["name"])))
    fault(sim, pod, code=94)
    rungs = "[{action: in_place_restart, timeout_s: 8}, {action: same_node, timeout_s: 20}]"
    outcome = await incident(client, queue, pod, policy(rungs, in_place=in_place,
                                                        checkpoint="{timeout_s: 30, poll_s: 0.1, hang_s: 1}"),
                             code=94)
    assert "hung" in notes(outcome, "checkpoint"), notes(outcome, "checkpoint")
    left_out = f"in-place restart of default/{pod['name']} left out: its workload was found hung"
    assert (left_out not in notes(outcome)) is tried, notes(outcome)
    assert outcome.recovered_by == ("in_place_restart" if tried else "same_node"), notes(outcome)
    told = podmedic_events(sim, pod)  # the pod's Events say why, as the timeline does
    assert any("workload hung" in message for _, message in told.values()), told
    delete_job(sim, job)
