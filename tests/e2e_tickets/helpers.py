"""Helpers of the vendor-ticket end-to-end tests: policies, outcomes, history checks."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import re
import uuid
from typing import Any

from temporalio.client import Client

from podmedic.domain.incident import IncidentOutcome, Phase
from podmedic.domain.policy_file import PolicySet, parse_policy
from podmedic_sim import SimCluster
from tests.helpers import wait_until
from workers.agent.sim_reader import SimNvmlReader
from workers.agent.translate import AgentConfig, Translator
from workflows.device.incident import DeviceIncidentWorkflow

_DATA = re.compile(r'"data":\s*"([A-Za-z0-9+/=]+)"')


def policy(ticket: str, *, wait_resolution_s: float = 60, ticket_timeout_s: float = 4,
           approvals_timeout_s: float = 3600, extra: str = "") -> PolicySet:
    """The test policy with ``ticket`` (YAML flow-mapping entries) as the ticket section; ``extra`` is
    one more line of the default driver's section."""
    return parse_policy(f"""
drivers:
  default:
    checkpoint: {{timeout_s: 3, poll_s: 0.2}}
    steps:
      ticket:
        start_to_close_s: {ticket_timeout_s}
        retry: {{initial_interval_s: 0.3, max_interval_s: 1, max_attempts: 0}}
    recovery:
      transient: [{{action: same_node, timeout_s: 20}}]
      permanent: [{{action: same_node, timeout_s: 20}}]
      verify_poll_s: 0.2
    close: {{heal_wait_s: 1, anti_flap_s: 0.5, poll_s: 0.3}}
    ticket: {{poll_s: 0.3, wait_resolution_s: {wait_resolution_s}, verify_s: 3, {ticket}}}
    approvals: {{timeout_s: {approvals_timeout_s}}}
    {extra}
  gpu.nvidia.com:
    classification: {{codes: {{permanent: [79]}}}}
""")


def free_device(sim: SimCluster, taken: set[str]) -> str:
    """A healthy, untainted device no pod holds and no test took yet (``driver/pool/device``); taken now."""
    for dev in sim.state()["devices"]:
        rid = f"{dev['driver']}/{dev['pool']}/{dev['device']}"
        if rid not in taken and dev["health"] == "Healthy" and not dev["taints"] and not dev["allocated_to"]:
            taken.add(rid)
            return rid
    raise AssertionError("no free device left in the simulator")


async def unused_device(worker: Client, sim: SimCluster, taken: set[str]) -> str:
    """A free device with no incident on this Temporal server yet (other packages share it), so the
    repeat-offender count is this test's alone."""
    while True:
        device = free_device(sim, taken)
        if not [wf async for wf in worker.list_workflows(f"WorkflowId = 'device/{device}'")]:
            return device


async def start_job(sim: SimCluster) -> dict[str, Any]:
    """A one-pod training job; returns its Ready pod as the simulator shows it."""
    name = f"train-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(name, image=f"registry.local/{name}:1"))

    def ready() -> dict[str, Any] | None:
        pods = [p for p in sim.state()["pods"] if p.get("job") == name and p.get("ready")]
        return pods[0] if pods else None

    return await asyncio.to_thread(wait_until, ready, timeout=30, what=f"a Ready pod of job {name}")


async def outcome(client: Client, device: str, *, timeout: float = 60) -> IncidentOutcome:
    """The result of the device incident's latest run."""
    handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{device}")
    return await asyncio.wait_for(handle.result(), timeout=timeout)


async def vendor_word_taken(client: Client, device: str, *, timeout: float = 30) -> None:
    """Wait until the incident has taken the vendor's resolution (it left ``AwaitingVendor``), so that the
    device's repair, reported next, verifies that resolution instead of ending the wait on its own."""
    handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{device}")

    async def left() -> bool:
        return (await handle.query(DeviceIncidentWorkflow.get_state)).phase is not Phase.AWAITING_VENDOR

    deadline = asyncio.get_running_loop().time() + timeout
    while not await left():
        assert asyncio.get_running_loop().time() < deadline, "the incident never took the vendor's resolution"
        await asyncio.sleep(0.2)


async def history_text(client: Client, workflow_id: str) -> str:
    """Every run's history as JSON plus every payload decoded, so nothing hides in base64."""
    parts: list[str] = []
    runs = {wf.run_id async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'")}
    runs.add((await client.get_workflow_handle(workflow_id).describe()).run_id)
    for run in runs:
        text = (await client.get_workflow_handle(workflow_id, run_id=run).fetch_history()).to_json()
        parts.append(text)
        parts += [base64.b64decode(m).decode("utf-8", "replace") for m in _DATA.findall(text)]
    return "\n".join(parts)


async def assert_no_secret(client: Client, device: str, secrets: list[str], known: str) -> None:
    """No secret in any history of the device's incident; ``known`` must be found (the check works)."""
    text = await history_text(client, f"device/{device}")
    assert known in text, "the history decoder is broken: a value known to be there was not found"
    leaked = [s for s in secrets if s in text]
    assert not leaked, f"secrets in workflow history: {leaked}"


async def replaced_and_seen_by_the_agent(sim: SimCluster, front: Any, device: str) -> None:
    """The vendor swaps the GPU, and the node agent reports the new one Healthy through the ingest.

    A swapped GPU is idle (no pod status speaks of it) and its driver publishes no taint, so NVML
    on its node is the one source that sees it: the agent's own reader and translator run here on
    the simulator's NVML, as ``podmedic agent nvml --sim-url`` does, and see the new UUID."""
    driver, pool, name = device.split("/")
    reader = await asyncio.to_thread(SimNvmlReader, sim.url, pool)
    translator = Translator(AgentConfig(node=pool, driver=driver), reader.devices)
    sim.set_device_health(driver, pool, name, "Healthy", reason="DeviceReplaced", message="board swapped")
    readings = await asyncio.to_thread(reader.read_all, dt.datetime.now(dt.UTC))
    events = [e for r in readings for e in translator.reading(r)]
    assert [(e["data"]["device"], e["data"]["health"], e["data"]["reason"]) for e in events] == [
        (name, "Healthy", "replaced")], events
    await front.post(events)
