"""End to end on the dev server and the simulator over HTTP: an incident canceled, terminated or reset from
Temporal at each stage leaves nothing held by a closed run, and the next incidents proceed.

Eighteen incidents, one per device: six stages (waiting for grace, fenced, checkpointing, NoExecute tainted,
recovering, awaiting the vendor), each stopped by each of Temporal's three buttons, all at once under one
policy. What the issue asks, checked within the sweep interval afterwards:

- no fleet guard permit is held by an incident whose latest run is closed;
- every DeviceTaintRule podmedic made (``app.kubernetes.io/managed-by=podmedic``) is held, and only by runs
  that are open (a rule nobody holds may not stay while its device reads Unhealthy: the sweep opens its
  incident again, which takes it over);
- a new failure of another device is fenced without waiting for the guard.

Where the shapes come from: the rule is KEP-5055's ``DeviceTaintRule`` read through the real kubectl; the
health sources are KEP-4680's ``allocatedResourcesStatus`` (Unknown, for the grace stage) and the driver's
ResourceSlice taints; Cancel, Terminate and Reset are Temporal's ``RequestCancelWorkflowExecution``,
``TerminateWorkflowExecution`` and ``ResetWorkflowExecution`` (to the first workflow task, as the UI's
"Reset to first workflow task" does); the PodDisruptionBudget that keeps the recovering stage's eviction
blocked (429) is ``policy/v1``, created with kubectl.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from activities import holders
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import running_desk
from tests.e2e_guard.stack import DRIVER, fail, stack, target
from tests.helpers import KUBECTL, assert_eventually, served_sim, wait_until
from workers.cli.guard import fetch_status

pytestmark = pytest.mark.asyncio(loop_scope="session")
STAGES = ("grace", "fenced", "checkpointing", "noexecute", "recovering", "vendor")
ACTIONS = ("cancel", "terminate", "reset")
WITH_PODS = ("grace", "fenced", "checkpointing", "recovering")
"""Stages held by something a pod brings: its Unknown status, the checkpoint gate (asked only when a pod can
save), a checkpoint that never answers, an eviction its PodDisruptionBudget refuses. The other two hold
with no pod: a permanent failure of a device nobody uses is tainted NoExecute and goes to its ticket."""


def _policy(ticket_url: str) -> Any:
    return parse_policy(f"""
guard:
  max_driver_share: 1
  max_pool_share: 1
  retry_s: 5
  reclaim_s: 3
  sweep_s: 1
  sweep_grace_s: 2
  storm: {{enabled: false}}
drivers:
  default:
    repeat_offenders: {{incidents: 0}}
    node_quarantine: {{enabled: false}}
    detection:
      slice_taints: {{"gpu.nvidia.com/xid": by_code}}
      unknown_grace_s: 900
      corroborate_s: 0
      node_correlation: {{devices: 50}}
      storm_fence: {{enabled: false}}
    classification: {{codes: {{permanent: [79]}}}}
    checkpoint: {{timeout_s: 900, poll_s: 0.5}}
    recovery:
      transient: [{{action: any_node, timeout_s: 900}}]
      eviction: {{retry_s: 1, max_wait_s: 900}}
    close: {{heal_wait_s: 900, anti_flap_s: 1, poll_s: 0.5}}
    ticket: {{url: "{ticket_url}", poll_s: 1, poll_max_s: 30, wait_resolution_s: 3600}}
    approvals: {{gates: [{{action: checkpoint}}, {{action: ticket}}], timeout_s: 3600, on_timeout: abort}}
""")


HOLD: dict[str, str] = {"fenced": "checkpoint", "noexecute": "ticket"}
"""The gate each stage is held at; every other gate a stage meets on its way is approved."""
IN_FLIGHT: dict[str, str] = {"checkpointing": "request_checkpoints", "recovering": "reschedule_any_node"}
"""The activity each of these stages is stopped in the middle of (a checkpoint nobody answers, an eviction
its PodDisruptionBudget refuses)."""


def _at_stage(stage: str, state: dict[str, Any]) -> bool:
    """Whether an incident's ``get_state`` says it is in ``stage``."""
    pending = (state.get("pending_approval") or {}).get("step")
    phase, doing = str(state["phase"]), str(state.get("doing") or "")
    at: dict[str, bool] = {
        "grace": phase == "WaitingGrace",
        "fenced": pending == "checkpoint" and bool(state.get("taint_rule")),
        "checkpointing": phase == "Checkpointing" and pending is None,
        "noexecute": pending == "ticket",
        "recovering": phase == "Recovering" and "any_node" in doing,
        "vendor": phase == "AwaitingVendor",
    }
    return at[stage]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """6 nodes x 4 GPUs: 12 training pods, 6 devices failing with no pod, and a spare one."""
    with served_sim(tmp_path_factory.mktemp("e2e-stop"), nodes=6, devices_per_node=4) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def stop_stack(dev_env: object, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    """The stack, with a webhook ticket desk that never resolves by itself."""
    async with running_desk(sim.url, resolve_after_s=None) as (_, url):
        async for client in stack(dev_env, sim, _policy(url), task_queue):  # type: ignore[arg-type]
            yield client


async def _kubectl(sim: SimCluster, *args: str, stdin: str = "") -> str:
    kubectl = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(sim.kubeconfig_path), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await kubectl.communicate(stdin.encode())
    assert kubectl.returncode == 0, (args, err.decode())
    return out.decode()


async def _start_jobs(sim: SimCluster) -> dict[tuple[str, str], str]:
    """One single-pod training Job per (stage, action) of the stages held by a pod; each one's device."""
    for stage in WITH_PODS:
        for action in ACTIONS:
            name = f"stop-{stage}-{action}"
            answer = "never" if stage == "checkpointing" else None
            sim.call(lambda n=name, a=answer: sim.engine.create_training_job(n, checkpoint_answer=a))
            if stage == "recovering":
                # --validate=false: the simulator serves no /openapi for kubectl's client-side validation yet.
                await _kubectl(sim, "create", "--validate=false", "-f", "-", stdin=json.dumps({
                    "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": name}}}}))

    def placed() -> dict[tuple[str, str], str] | None:
        ready = {p["job"]: p["devices"][0] for p in sim.state()["pods"] if p.get("ready") and p.get("devices")}
        wanted = {(s, a): f"stop-{s}-{a}" for s in WITH_PODS for a in ACTIONS}
        if not all(job in ready for job in wanted.values()):
            return None
        return {key: ready[job] for key, job in wanted.items()}
    found = await asyncio.to_thread(wait_until, placed, timeout=90, what="12 Ready training pods")
    assert found is not None
    return found


def _free_devices(used: set[str], count: int) -> list[str]:
    free = [d for d in (f"{DRIVER}/node-{n:04d}/gpu-{g}" for n in range(6) for g in range(4)) if d not in used]
    assert len(free) >= count, used
    return free[:count]


async def _state(client: Client, workflow_id: str) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = await client.get_workflow_handle(workflow_id).query("get_state")
    except RPCError:
        return None  # not open yet
    return state


async def _drive(client: Client, devices: dict[tuple[str, str], str]) -> None:
    """Approve the gates on each incident's way until every one is in its stage."""
    async def all_there() -> None:
        behind: list[str] = []
        for (stage, _), device in devices.items():
            workflow_id = f"device/{device}"
            state = await _state(client, workflow_id)
            if state is None:
                behind.append(f"{workflow_id}: not open")
                continue
            pending = (state.get("pending_approval") or {}).get("step")
            if pending and pending != HOLD.get(stage):
                await client.get_workflow_handle(workflow_id).execute_update(
                    "approve", {"step": pending, "by": "e2e", "note": f"on the way to {stage}"})
            if not _at_stage(stage, state):
                behind.append(f"{workflow_id} for {stage}: {state['phase']} {state.get('doing')}")
            elif stage in IN_FLIGHT and not await _started(client, workflow_id, IN_FLIGHT[stage]):
                behind.append(f"{workflow_id} for {stage}: {IN_FLIGHT[stage]} not started yet")
        assert not behind, behind
    await assert_eventually(all_there, timeout=180, interval=0.5)


async def _started(client: Client, workflow_id: str, activity_type: str) -> bool:
    """Whether the run has ``activity_type`` started and not finished (a worker is running it)."""
    described = await client.get_workflow_handle(workflow_id).describe()
    return any(p.activity_type.name == activity_type and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
               for p in described.raw_description.pending_activities)


async def _reset(client: Client, workflow_id: str) -> None:
    """Temporal's reset to the first workflow task: the run ends Terminated, a new one replays and goes on."""
    handle = client.get_workflow_handle(workflow_id)
    first = None
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            first = event.event_id
            break
    assert first is not None
    run_id = (await handle.describe()).run_id
    await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
        reason="e2e: Reset to the first workflow task", workflow_task_finish_event_id=first,
        request_id=str(uuid.uuid4())))


async def _stop(client: Client, action: str, workflow_id: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    if action == "cancel":
        await handle.cancel()
    elif action == "terminate":
        await handle.terminate(reason="e2e: Terminate")
    else:
        await _reset(client, workflow_id)


async def _run_open(client: Client, holder: str) -> bool:
    workflow_id, _, run_id = holder.partition("@")
    described = await client.get_workflow_handle(workflow_id, run_id=run_id or None).describe()
    return described.status is WorkflowExecutionStatus.RUNNING


async def _latest_open(client: Client, workflow_id: str) -> bool:
    described = await client.get_workflow_handle(workflow_id).describe()
    return described.status is WorkflowExecutionStatus.RUNNING


async def test_cancel_terminate_and_reset_at_each_stage_leave_nothing_held_by_a_closed_run(
        sim: SimCluster, stop_stack: Client) -> None:
    client = stop_stack
    devices = dict(await _start_jobs(sim))
    spare, *no_pod = _free_devices(set(devices.values()), 7)
    for stage, action in [(s, a) for s in ("noexecute", "vendor") for a in ACTIONS]:
        devices[(stage, action)] = no_pod.pop()
    for (stage, _), device in devices.items():
        _, pool, name = device.split("/")
        if stage == "grace":
            sim.set_device_health(DRIVER, pool, name, "Unknown", reason="NVMLTimeout", message="NVML timed out")
        elif stage in WITH_PODS:
            # XID 31 is transient (NoSchedule only: the pod stays to be checkpointed and evicted); the driver's
            # taint is NoSchedule too, and the pod's status reads the device Unhealthy as the sweep reads it.
            sim.set_slice_taint(DRIVER, pool, name, "gpu.nvidia.com/xid", value="31", effect="NoSchedule")
            sim.set_device_health(DRIVER, pool, name, "Unhealthy", reason="XidError", code=31, message="XID 31")
        else:
            fail(sim, [(pool, name)], "79")
    await _drive(client, devices)

    for (_, action), device in devices.items():
        await _stop(client, action, f"device/{device}")

    async def nothing_held_by_a_closed_run() -> None:
        status = await fetch_status(target(client))
        closed_permits = [p.incident_id for p in status.permits if not await _latest_open(client, p.incident_id)]
        assert not closed_permits, (closed_permits, status.history[-10:])
        rules = json.loads(await _kubectl(sim, "get", "devicetaintrules", "-l", holders.MANAGED_BY + "=podmedic",
                                          "-o", "json"))["items"]
        wrong: list[str] = []
        for rule in rules:
            held = holders.holders_of(rule)
            if not held:
                wrong.append(f"{rule['metadata']['name']}: held by nobody ({rule['metadata']['annotations']})")
            wrong += [f"{rule['metadata']['name']}: held by {h}, closed" for h in held
                      if not await _run_open(client, h)]
        assert not wrong, (wrong, status.history[-10:])
    await assert_eventually(nothing_held_by_a_closed_run, timeout=90, interval=1.0)

    # A new failure of another device is fenced at once: the guard counts nothing the stopped runs held.
    _, pool, name = spare.split("/")
    fail(sim, [(pool, name)], "79")

    async def spare_fenced() -> None:
        state = await _state(client, f"device/{spare}")
        assert state is not None and state.get("taint_rule"), state and (state["phase"], state.get("doing"))
    await assert_eventually(spare_fenced, timeout=60, interval=0.5)
    # And the devices stopped while they still read Unhealthy have a run of their incident open again (the
    # sweep's, or the reset's) that is not held back by the guard.
    for (stage, action), device in devices.items():
        if stage == "grace":
            continue
        state = await _state(client, f"device/{device}")
        assert state is not None and state["phase"] != "Throttled", (stage, action, state and state["phase"])
