"""Fixtures of the checkpoint end-to-end tests: the simulator, the real worker on the dev server,
and helpers that open an incident for a training pod and stop it right after the checkpoint."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import AbortRequest, IncidentOutcome, IncidentState, Phase
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, PodKey
from podmedic.domain.policy_file import PolicySet, parse_policy
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from tests.enforced import as_component
from tests.helpers import assert_eventually, served_sim, wait_until
from workers.ingest.starts import deliver_event
from workers.worker.main import build_worker
from workflows.device.incident import DeviceIncidentWorkflow

# The taint waits for an approval nobody gives: each test stops its incident right after the checkpoint.
# Many devices of one node fail in this module: no node quarantine, which would take the taint over.
POLICY = parse_policy("""
drivers:
  default:
    node_quarantine: {enabled: false}
    checkpoint: {timeout_s: 3, poll_s: 0.1}
    approvals: {gates: [{action: taint}], timeout_s: 600, on_timeout: abort}
  gpu.nvidia.com:
    classification: {codes: {permanent: [79], container_code: [13, 31, 43]}}
""")


@dataclass
class Stack:
    """What a test talks to."""

    sim: SimCluster
    client: Client
    task_queue: str
    kube: KubeGateway
    policy: PolicySet


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("ckpt"), nodes=4, image_pull_s=0.2, container_start_s=0.05,
                    kubelet_report_s=0.05, workload_step_s=0.05, checkpoint_save_s=0.2,
                    scheduler_interval_s=0.05) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster) -> AsyncIterator[Stack]:
    kube = KubeGateway(as_component(sim, "worker"))  # the worker's ServiceAccount, under deploy/'s RBAC
    task_queue = f"ckpt-{uuid.uuid4().hex[:8]}"
    async with build_worker(dev_env.client, task_queue, kube):
        yield Stack(sim, dev_env.client, task_queue, kube, POLICY)
    kube.close()


def start_job(sim: SimCluster, parallelism: int = 1, **options: Any) -> list[dict[str, Any]]:
    """Create a training Job (``jobset=True``: a JobSet of one-pod Jobs) and return its pods once all are
    Ready (sim state JSON)."""
    name = f"train-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(name, parallelism=parallelism, **options))

    def ready() -> list[dict[str, Any]] | None:
        pods = [p for p in sim.state()["pods"] if (p.get("jobset") or p.get("job")) == name and p.get("ready")]
        return pods if len(pods) == parallelism else None

    pods: list[dict[str, Any]] = wait_until(ready, timeout=30, what=f"{parallelism} Ready pod(s) of {name}")
    return pods


def annotate(sim: SimCluster, pod: dict[str, Any], **notes: str) -> None:
    """Set annotations on a pod straight in the simulator's store (as its owner would)."""
    sim.call(lambda: sim.store.mutate("pods", pod["namespace"], pod["name"],
                                      lambda p: p["metadata"].setdefault("annotations", {}).update(notes)))


async def incident_until_checkpointed(stack: Stack, pod: dict[str, Any], code: int = 31,
                                      crash: bool = False) -> tuple[IncidentOutcome, IncidentState]:
    """Fail the pod's device, open its incident, let the checkpoint stage run, then abort it."""
    driver, pool, device = pod["devices"][0].split("/")
    stack.sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=code, crash=crash,
                                message=f"XID {code}")
    event = DeviceHealthEvent(device=DeviceRef(driver=driver, pool=pool, device=device), health=Health.UNHEALTHY,
                              node=pod["node"], reason="XidError", code=code, message=f"XID {code}",
                              source="test", observed_at=dt.datetime.now(dt.UTC), event_id=uuid.uuid4().hex,
                              pod=PodKey(namespace=pod["namespace"], name=pod["name"], uid=pod["uid"]))
    run_id = await deliver_event(stack.client, event, stack.policy, task_queue=stack.task_queue)
    handle = stack.client.get_workflow_handle_for(DeviceIncidentWorkflow.run, event.device.workflow_id,
                                                  run_id=run_id)
    async def past_the_checkpoint() -> IncidentState:
        state = await handle.query(DeviceIncidentWorkflow.get_state)
        assert state.phase in (Phase.AWAITING_APPROVAL, Phase.CLOSED), \
            f"incident never got past the checkpoint: {state.phase} {state.timeline}"
        return state

    state = await assert_eventually(past_the_checkpoint, timeout=30, interval=0.1)
    if state.phase is not Phase.CLOSED:
        await handle.execute_update(DeviceIncidentWorkflow.abort, AbortRequest(by="test", reason="checkpoint seen"))
    outcome = await asyncio.wait_for(handle.result(), timeout=60)
    return outcome, await handle.query(DeviceIncidentWorkflow.get_state)
