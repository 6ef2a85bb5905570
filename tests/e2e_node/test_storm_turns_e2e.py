"""End to end: in a storm, at most ``storm_fence.acting`` fenced incidents of the driver act at once;
the others wait their turn, fenced, and every one closes.

The Temporal dev server, the simulator over HTTP, the real worker and ingest (pod status source):
six devices fail together, a storm from the third (``storm_fence.devices: 3``), two act at a time.
What is checked is read from outside the code under test: each incident's recorded timeline (when
its turn came, when it closed) and the keeper's query.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import datetime

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import DeviceRef, Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.storm_turns import TurnsState, turns_workflow_id
from podmedic.incidents.query import list_incidents, list_query
from podmedic_sim import SimCluster
from tests.e2e_node.stack import ingest_and_worker, ready_jobs
from tests.helpers import assert_eventually, served_sim
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.fleet.storm_turn_keeper import StormTurnsWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

ACTING = 2
POLICY = parse_policy(f"""
drivers:
  default:
    detection:
      node_correlation: {{devices: 99}}
      storm_fence: {{devices: 3, window_s: 60, min_hold_s: 1, max_hold_s: 300, poll_s: 0.5, acting: {ACTING}}}
    checkpoint: {{timeout_s: 3, poll_s: 0.2}}
    recovery:
      transient: [{{action: in_place_restart, timeout_s: 30}}]
      verify_poll_s: 0.2
    close: {{heal_wait_s: 30, anti_flap_s: 1, poll_s: 0.5}}
    ticket: {{backend: none}}
""")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("e2e-turns"), nodes=2, image_pull_s=0.2) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async with ingest_and_worker(dev_env.client, sim, task_queue, POLICY):
        yield dev_env.client


def _at(outcome: IncidentOutcome, step: str, starts: str) -> datetime:
    return next(e.at for e in outcome.timeline if e.step == step and e.message.startswith(starts))


def _most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])  # an end before a start
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


async def test_a_storm_lets_its_fenced_incidents_act_a_few_at_a_time_and_every_one_closes(
        sim: SimCluster, stack: Client) -> None:
    client = stack
    pods = await asyncio.to_thread(ready_jobs, sim, 6)
    devices = [DeviceRef.model_validate(dict(zip(("driver", "pool", "device"), p["devices"][0].split("/"),
                                                 strict=True))) for p in pods]
    for d in devices:  # a restart resets the GPU: the in-place restart recovers each
        sim.set_device_health(d.driver, d.pool, d.device, "Unhealthy", reason="XidError",
                              message="XID 94: contained ECC error", clears_on_restart=True)

    async def closed(device: DeviceRef) -> IncidentOutcome:
        handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, device.workflow_id)
        for _ in range(600):
            try:
                return await asyncio.wait_for(handle.result(), timeout=1)
            except (RPCError, TimeoutError):  # not started yet, or still running
                await asyncio.sleep(0.5)
        raise AssertionError(f"{device.workflow_id} did not close")

    outcomes = await asyncio.gather(*(closed(d) for d in devices))
    assert [o.outcome for o in outcomes] == [Outcome.RECOVERED_IN_PLACE] * 6, [o.explanation for o in outcomes]
    waited = [o for o in outcomes if any(e.step == "storm" for e in o.timeline)]
    # The third report on makes the storm; the first two may have been opened before it was seen.
    assert len(waited) >= 4, [(o.incident_id, [e.message for e in o.timeline if e.step == "storm"]) for o in outcomes]
    spans = [(_at(o, "storm", "its turn came"), _at(o, "close", "recovered_in_place")) for o in waited]
    assert _most_at_once(spans) == ACTING, spans  # never more; and the limit was reached
    late = [o for o in waited if _at(o, "storm", "its turn came") > min(end for _, end in spans)]
    assert late, spans  # some waited until another had closed

    keeper = client.get_workflow_handle_for(StormTurnsWorkflow.run, turns_workflow_id(devices[0].driver))
    state: TurnsState = await keeper.query(StormTurnsWorkflow.get_state)
    assert (state.acting_limit, state.admitted, state.closed, state.acting, state.waiting) == \
        (ACTING, len(waited), len(waited), 0, 0), state

    # Operators find the keeper as they find incidents: `podmedic incidents list --type storm`.
    async def listed() -> None:
        rows = await list_incidents(client, list_query("storm"), 10)
        assert [(r.id, r.attributes.get("PodmedicPhase")) for r in rows] == [(keeper.id, "Storm")], rows

    await assert_eventually(listed, timeout=15)
