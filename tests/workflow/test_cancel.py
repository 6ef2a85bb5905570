"""A Temporal cancel request, or podmedic's ``abort``, closes a device incident at whatever stage it is in.

What Cancel is comes from Temporal: the UI's Cancel and ``temporal workflow cancel`` send a
RequestCancelWorkflowExecution, which the Python SDK delivers as ``asyncio.CancelledError`` at
the workflow's current await (a timer, a condition, or an activity: with the default
``ActivityCancellationType.TRY_CANCEL`` the activity's result is abandoned at once, an
``ActivityError`` caused by ``CancelledError``). ``abort`` cancels the incident's work the same way.
Each stage below holds the incident inside one step (the fake activity waits and is never let go
before the close), stops it, and checks the close: no wait or step has to look for the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import AbortRequest, Phase
from podmedic.domain.models import DeviceRef, Health, Outcome
from podmedic.domain.node import NodeIncidentOutcome
from podmedic.domain.policy_file import parse_policy
from tests.helpers import assert_eventually
from tests.workflow.fakes import FakeCluster
from tests.workflow.operator_helpers import open_incident, own_time_skipping_env, state_in, worker
from tests.workflow.test_node_quarantine import _worker as node_worker
from tests.workflow.test_node_quarantine import gated_watch_at_its_gate
from workflows.device.incident import DeviceIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")

POLICY = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 600, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 86400, poll_s: 60}
    classification: {codes: {permanent: [79]}}
""")


@pytest_asyncio.fixture(loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async for server in own_time_skipping_env():
        yield server


@pytest.mark.parametrize("how", ["cancel", "abort"])
@pytest.mark.parametrize(("held", "code", "phase"), [
    ("request_checkpoints", 94, Phase.CHECKPOINTING),  # an activity in flight
    ("taint_device", 79, Phase.TAINTING),  # the fence (a local activity), NoSchedule before discovery
    ("reschedule_same_node", 79, Phase.RECOVERING),
    (None, 94, Phase.AWAITING_HEAL),  # a transient fault waiting for the device to heal: a timer
    (None, 79, Phase.AWAITING_VENDOR),  # a condition with a timeout
])
async def test_cancel_and_abort_close_the_incident_at_each_stage(env: WorkflowEnvironment, task_queue: str,
                                                                held: str | None, code: int, phase: Phase,
                                                                how: str) -> None:
    fake = FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    gate = fake.hold(held) if held else None
    name = f"gpu-{how}-{held or phase.value}".lower().replace("_", "-")
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0007", device=name)
    async with worker(env.client, task_queue, fake):
        handle = await open_incident(env.client, task_queue, device, POLICY, code=code)

        async def inside() -> None:
            if held:
                assert fake.calls[held] >= 1, fake.calls
        await assert_eventually(inside, timeout=30)
        if held != "taint_device":  # the fence's phase moves on around its local activity
            await state_in(handle, phase)
        if how == "cancel":
            await handle.cancel()
        else:
            await handle.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="dana", reason="wrong node"))

        async def closed() -> None:
            assert (await handle.describe()).status is not WorkflowExecutionStatus.RUNNING
        await assert_eventually(closed, timeout=30)  # no time needs to pass: the cancel closes it at once
        outcome = await handle.result()
        if gate is not None:
            gate.set()  # the abandoned attempt ends; its result goes nowhere
    assert outcome.outcome is Outcome.ABORTED, outcome.explanation
    if how == "abort":
        assert outcome.explanation == "aborted by dana: wrong node"
        assert (outcome.decisions[-1].decision, outcome.decisions[-1].by) == ("aborted", "dana")
    else:
        canceled = "canceled from Temporal (a cancel request: the UI's Cancel or `temporal workflow cancel`) in phase "
        assert outcome.explanation.startswith(canceled), outcome.explanation
        if held != "taint_device":
            assert outcome.explanation == canceled + phase.value
        assert (outcome.decisions[-1].decision, outcome.decisions[-1].by) == ("canceled", "temporal")
    if held != "taint_device":  # the fence comes before discovery: no pod is known to tell yet
        assert fake.notices[-1].step == "closed" and "incident closed: aborted" in fake.notices[-1].message


async def test_a_temporal_cancel_closes_the_node_incident_saying_what_stays(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    # Cancel reaches the node incident wherever its quarantine waits (here at its approval gate) and
    # closes it with what it did said: nothing was quarantined yet, nothing is left for an operator.
    client = env.client
    node = "node-0310"
    devices = [DeviceRef(driver="gpu.nvidia.com", pool=node, device=f"gpu-{i}") for i in range(3)]
    fake = FakeCluster()
    fake.health, fake.ticket_state = Health.UNHEALTHY, "open"
    async with node_worker(client, task_queue, fake):
        watch = await gated_watch_at_its_gate(client, task_queue, devices, "c")
        await watch.cancel()

        async def closed() -> None:  # no time needs to pass (waiting on the result would skip time)
            assert (await watch.describe()).status is not WorkflowExecutionStatus.RUNNING
        await assert_eventually(closed)
        result: NodeIncidentOutcome = await watch.result()
        for d in devices:
            await client.get_workflow_handle(d.workflow_id).terminate("test done")
    assert result.explanation == (f"canceled from Temporal (a cancel request) in phase AwaitingApproval: node {node} "
                                  "was not quarantined"), result.explanation
    assert not result.quarantined and fake.calls["quarantine_node"] == 0
