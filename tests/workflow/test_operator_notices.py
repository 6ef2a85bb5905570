"""What the incident tells: a pod Event per step in order, the summary and details for the UI."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from podmedic.domain import describe
from podmedic.domain.incident import IncidentState, PendingApproval, Phase
from podmedic.domain.models import ConfigProblem, DeviceRef, Health, Outcome, PodKey
from podmedic.domain.policy_file import parse_policy
from tests.workflow.fakes import POD, T0, FakeCluster, event
from tests.workflow.operator_helpers import open_incident, outcome_of, own_time_skipping_env, worker

POLICY = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5, heal_wait_s: 10, poll_s: 1}
    ticket: {url: "http://tickets.invalid", wait_resolution_s: 60, poll_s: 5}
    classification: {codes: {permanent: [79], container_code: [31]}}
    approvals: {gates: [{action: ticket, timeout_s: 900, on_timeout: proceed}], timeout_s: 60}
""")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async for server in own_time_skipping_env():
        yield server


# Since fold-step-notices (workflows/record/pod_notices.py) the fence is named in the opening Event and the
# checkpoint's notice leads the next one to the same pods: every step is told, in fewer Events.
@pytest.mark.parametrize(("code", "steps", "outcome"), [
    (31, ["opened", "restarted", "closed"], Outcome.RECOVERED_IN_PLACE),
    (79, ["opened", "taint_raised", "rescheduled", "awaiting_approval", "ticketed", "closed"],
     Outcome.RESOLVED_BY_VENDOR),
])
async def test_one_pod_event_per_step_in_order(env: WorkflowEnvironment, task_queue: str, code: int,
                                               steps: list[str], outcome: Outcome) -> None:
    client = env.client
    fake = FakeCluster()
    fake.health = Health.UNHEALTHY if code == 79 else Health.HEALTHY
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0400", device=f"gpu-{code}")
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, device, POLICY, code=code)
        result = await outcome_of(env, handle)
        run_id = (await handle.describe()).run_id
    assert result.outcome is outcome
    assert [n.step for n in fake.notices] == steps
    assert {n.run_id for n in fake.notices} == {run_id}
    assert all(n.incident_id == device.workflow_id and n.reason.startswith("Podmedic") for n in fake.notices)
    assert all([p.name for p in n.pods] == [POD.name] for n in fake.notices)
    assert result.outcome.value in fake.notices[-1].message
    assert "fenced: DeviceTaintRule " in fake.notices[0].message
    assert "checkpoint" in fake.notices[1].message.split("; then ")[0] and "; then " in fake.notices[1].message
    # A notice writes the Event alone (no read, no annotation) only to a pod an earlier one found.
    told: set[PodKey] = set()
    for notice in fake.notices:
        assert set(notice.annotated) == set(notice.pods) & told, notice.step
        told |= set(notice.pods)
    assert fake.notices[0].annotated == [] and fake.notices[1].annotated == fake.notices[1].pods


def test_static_details_name_device_node_classification_and_policy() -> None:
    first = event(code=79, device=DeviceRef(driver="gpu.nvidia.com", pool="node-0400", device="gpu-9"))
    text = describe.static_details(first, POLICY.for_driver("gpu.nvidia.com"))
    assert "`gpu.nvidia.com/node-0400/gpu-9`" in text and "**Node**: `node-0400`" in text
    assert "`device_failed`, permanent" in text
    assert "**Approval gates**: ticket (900s, then proceed)" in text
    assert "permanent → `NoExecute`" in text
    assert describe.static_summary(first) == "gpu.nvidia.com/node-0400/gpu-9 Unhealthy — XID 79"


def test_current_details_show_a_pending_approval_with_the_commands() -> None:
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0400", device="gpu-9")
    state = IncidentState(incident_id=device.workflow_id, device=device, phase=Phase.AWAITING_APPROVAL,
                          doing="waiting for an operator to approve taint", why="XID 79: permanent",
                          pending_approval=PendingApproval(step="taint", action="NoExecute taint", gate="taint",
                                                           since=T0, timeout_s=60, on_timeout="abort"))
    text = describe.current_details(state)
    assert text.startswith("**AwaitingApproval** — waiting for an operator to approve taint")
    assert "**Pending approval: `taint`**" in text and "abort if nobody answers within 60s" in text
    assert f"podmedic incidents approve {device.workflow_id} taint --by NAME" in text
    assert "**Why**: XID 79: permanent" in text


def test_config_details_say_it_is_the_pods_own_configuration() -> None:
    problem = ConfigProblem(pod=PodKey(namespace="team-a", name="infer-1", uid="u-1"), driver="gpu.nvidia.com",
                            node="node-0400", reason="FailedPrepareDynamicResources",
                            message="invalid opaque parameter sharing.strategy", observed_at=T0, event_id="ev-1")
    text = describe.config_details(problem)
    assert "### Configuration problem of pod `team-a/infer-1`" in text
    assert "invalid opaque parameter sharing.strategy" in text and "never taints a device" in text


async def test_a_closing_notice_that_could_not_be_written_is_in_the_outcome(env: WorkflowEnvironment,
                                                                           task_queue: str) -> None:
    # The closing Event is written after the outcome is decided (workflows/device/incident.py run): a refusal
    # noted then must still reach the record an operator reads once the run has completed.
    client = env.client
    fake = FakeCluster()
    fake.notice_refused = {"closed"}
    device = DeviceRef(driver="gpu.nvidia.com", pool="node-0400", device="gpu-closing")
    async with worker(client, task_queue, fake):
        handle = await open_incident(client, task_queue, device, POLICY, code=31)
        result = await outcome_of(env, handle)
    assert result.outcome is Outcome.RECOVERED_IN_PLACE
    told = [e.message for e in result.timeline if e.step == "notice"]
    assert len(told) == 1 and told[0].startswith("PodmedicIncidentClosed not recorded on the pods: "), told
    assert "forbidden" in told[0]
