"""End to end: the Temporal dev server, the simulator over HTTP, the real worker and ingest."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.models import Outcome
from podmedic.domain.policy_file import parse_policy
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk
from tests.helpers import served_sim, wait_until
from tests.incidents import last_run, next_outcome
from tests.pipeline import running_pipeline, served_desk

pytestmark = pytest.mark.asyncio(loop_scope="session")
DRIVER = "gpu.nvidia.com"

POLICY = parse_policy("""
drivers:
  default:
    checkpoint: {timeout_s: 5, poll_s: 0.2}
    recovery:
      transient:
        - {action: in_place_restart, timeout_s: 6}
        - {action: same_node, timeout_s: 20}
      permanent:
        - {action: same_node, timeout_s: 20}
      verify_poll_s: 0.2
    close: {heal_wait_s: 2, anti_flap_s: 1, poll_s: 0.5}
    ticket: {poll_s: 0.5, wait_resolution_s: 60}
  gpu.nvidia.com:
    detection: {corroborate_s: 10}
    classification: {codes: {permanent: [79], container_code: [13, 31, 43]}}
""")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    # A process on a GPU that fell off the bus dies at its next CUDA call (crash_after_s): seconds, not
    # the simulator's default 0.1 s, which raced the node agent's report (a pod that has already failed
    # holds no claim, so discovery finds no pod and no last known checkpoint: seen under CI load).
    with served_sim(tmp_path_factory.mktemp("e2e"), image_pull_s=1.0, crash_after_s=3.0) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def desk(sim: SimCluster) -> AsyncIterator[VendorDesk]:
    """A real HTTP ticket receiver that resolves tickets after 1 s by replacing the device."""
    async with served_desk(sim, resolve_after_s=1.0) as vendor:
        yield vendor


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_env: WorkflowEnvironment, sim: SimCluster, desk: VendorDesk,
                task_queue: str) -> AsyncIterator[tuple[Client, str]]:
    """The worker, the ingest service and the node agent against the simulator, on a fresh task queue."""
    async with running_pipeline(dev_env.client, sim, POLICY, task_queue):
        yield dev_env.client, task_queue


def _running_pod(sim: SimCluster, job: str) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        pods = [p for p in sim.state()["pods"] if p.get("job") == job and p.get("ready")]
        return pods[0] if pods else None

    return wait_until(find, timeout=30, what=f"a Ready pod of job {job}")


async def _start_job(sim: SimCluster) -> tuple[str, dict[str, Any]]:
    name = f"train-{uuid.uuid4().hex[:6]}"
    # Each job its own image: only the node that ran it has the image, as in a real fleet.
    sim.call(lambda: sim.engine.create_training_job(name, image=f"registry.local/{name}:1"))
    pod = await asyncio.to_thread(_running_pod, sim, name)
    return name, pod


def _device(pod: dict[str, Any]) -> tuple[str, str, str]:
    driver, pool, device = pod["devices"][0].split("/")
    return driver, pool, device


async def test_transient_fault_recovers_in_place(sim: SimCluster, stack: tuple[Client, str]) -> None:
    client, _ = stack
    _, pod = await _start_job(sim)
    driver, pool, device = _device(pod)
    previous = await last_run(client, pod["devices"][0])
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=31,
                          message="XID 31: MMU fault", clears_on_restart=True)
    outcome = await next_outcome(client, f"{driver}/{pool}/{device}", previous)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, outcome.explanation
    after = next(p for p in sim.state()["pods"] if p["name"] == pod["name"])
    assert after["uid"] == pod["uid"]
    assert after["restart_count"] == pod["restart_count"] + 1
    assert after["ready"] and after["devices"] == pod["devices"]
    assert outcome.checkpoint_ids, outcome.timeline
    assert outcome.taint_removed
    assert not [r for r in sim.state()["taint_rules"] if device in str(r)]


@pytest.fixture
def claim_and_rule_watches_refused(sim: SimCluster) -> Iterator[None]:
    """The worker's watches of ResourceClaims and DeviceTaintRules answered 500 from its start (asked for
    before ``stack``, so before the worker lists): its claim and rule caches never become current."""
    sim.add_api_fault(verbs=["watch"], resources=["resourceclaims", "devicetaintrules"], components=["worker"],
                      status=500)
    yield
    sim.clear_api_faults()


async def test_without_its_claim_and_rule_watches_the_worker_reads_the_api_server(
        sim: SimCluster, claim_and_rule_watches_refused: None, stack: tuple[Client, str]) -> None:
    # The caches (podmedic/kube/object_cache.py) only ever save requests: with their watches broken the
    # same incident recovers, discovery reading the pod's claim and the release its rule with a GET each.
    # These are the worker's only claim and rule GETs in the e2e runs, which the RBAC proof counts.
    client, _ = stack
    _, pod = await _start_job(sim)
    driver, pool, device = _device(pod)
    previous = await last_run(client, pod["devices"][0])
    gets = {r: _worker_requests(sim, "get", r) for r in ("resourceclaims", "devicetaintrules")}
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=31,
                          message="XID 31: MMU fault", clears_on_restart=True)
    outcome = await next_outcome(client, f"{driver}/{pool}/{device}", previous)
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, outcome.explanation
    assert outcome.taint_removed and not [r for r in sim.state()["taint_rules"] if device in str(r)]
    assert all(_worker_requests(sim, "get", r) > n for r, n in gets.items()), gets


def _worker_requests(sim: SimCluster, verb: str, resource: str) -> int:
    return sum(int(e["count"]) for e in sim.ledger.entries()  # type: ignore[call-overload]
               if e["verb"] == verb and e["resource"] == resource and e["component"] == "worker")


async def test_fault_a_restart_cannot_fix_moves_the_pod_on_the_same_node(
    sim: SimCluster, stack: tuple[Client, str], desk: VendorDesk
) -> None:
    client, _ = stack
    _, pod = await _start_job(sim)
    driver, pool, device = _device(pod)
    previous = await last_run(client, pod["devices"][0])
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", message="XID 94: contained ECC")
    outcome = await next_outcome(client, f"{driver}/{pool}/{device}", previous)
    assert outcome.recovered_by == "same_node", outcome.timeline
    assert outcome.pod is not None and outcome.pod.node == pod["node"]
    replacement = next(p for p in sim.state()["pods"] if p["name"] == outcome.pod.name)
    assert replacement["ready"] and replacement["devices"] != pod["devices"]
    assert replacement["devices"][0].split("/")[1] == pool
    assert outcome.checkpoint_ids, outcome.timeline
    assert outcome.outcome is Outcome.RESOLVED_BY_VENDOR, outcome.explanation


async def test_permanent_fault_one_taint_rule_one_ticket(
    sim: SimCluster, stack: tuple[Client, str], desk: VendorDesk
) -> None:
    client, _ = stack
    _, pod = await _start_job(sim)
    driver, pool, device = _device(pod)
    # The job checkpoints on its own first (same protocol), so a last known checkpoint exists.
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    kube.patch_pod_annotations("default", pod["name"], {"podmedic.io/checkpoint-request": "job-own-1"})
    wait_until(lambda: (kube.get_pod("default", pod["name"]) or {}).get("metadata", {}).get("annotations", {})
               .get("podmedic.io/checkpoint-ack") == "job-own-1", timeout=10, what="the job's own checkpoint")
    kube.close()
    before = len(desk.tickets)
    previous = await last_run(client, pod["devices"][0])
    created: list[str] = []
    unsubscribe = sim.call(sim.store.add_listener, lambda e: created.append(e.obj["metadata"]["name"])
                           if e.type == "ADDED" and e.resource == "devicetaintrules" else None)
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=79, crash=True,
                          message="XID 79: GPU has fallen off the bus")
    outcome = await next_outcome(client, f"{driver}/{pool}/{device}", previous)
    assert outcome.outcome is Outcome.RESOLVED_BY_VENDOR, outcome.explanation
    assert outcome.permanence == "permanent", "\n".join(t.message for t in outcome.timeline)
    assert outcome.checkpoint_ids, "\n".join(f"{t.at:%T.%f} {t.step}: {t.message}" for t in outcome.timeline)
    assert "ticket" in outcome.steps and outcome.ticket_id
    mine = [t for t in desk.tickets.values() if t["evidence"].get("device", {}).get("device") == device
            and t["evidence"]["device"]["pool"] == pool]
    assert len(mine) == 1 and len(desk.tickets) == before + 1
    sim.call(unsubscribe)
    assert created == [outcome.taint_rule]  # exactly one rule, removed after the vendor fixed the device
    assert outcome.taint_removed
    assert not [r for r in sim.state()["taint_rules"] if device in str(r) and pool in str(r)]
