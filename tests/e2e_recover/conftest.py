"""Recovery end to end: the Temporal dev server, the simulator over HTTP and the real worker.

Incidents are opened directly (signal-with-start of a health event) with a policy per test,
so each test picks the one rung or mechanism it is about.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes import client, config
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, IncidentInput, PodKey
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.policy_ref import POLICY_MEMO, pack, ref_of
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster, SimConfig
from podmedic_sim.config import SimTimings
from tests.enforced import as_component
from tests.helpers import run_kubectl, wait_until
from workers.admission.registration import PATH, placement_webhook_configuration
from workers.worker.main import build_worker
from workflows.device.incident import DeviceIncidentWorkflow

DRIVER = "gpu.nvidia.com"
WEBHOOK = "podmedic-placement-test"
IMAGE = "registry.local/trainer:1"
BASE = """
drivers:
  default:
    checkpoint: {checkpoint}
    recovery:
      transient: {rungs}
      verify_poll_s: 0.1
      in_place: {in_place}
      eviction: {eviction}
    close: {{heal_wait_s: 1, anti_flap_s: 0.5, poll_s: 0.2}}
    ticket: {{url: "", poll_s: 0.5, wait_resolution_s: 5}}
  gpu.nvidia.com:
    classification: {{codes: {{container_code: [13, 31, 43]}}}}
"""


def policy(rungs: str, in_place: str = "{mechanism: exit_code}",
           eviction: str = "{retry_s: 0.3, max_wait_s: 3}", checkpoint: str = "{timeout_s: 5, poll_s: 0.1}") -> Any:
    """A driver policy with these rungs (a YAML flow list), mechanism, eviction retries and checkpoint."""
    return parse_policy(BASE.format(rungs=rungs, in_place=in_place, eviction=eviction,
                                    checkpoint=checkpoint)).for_driver(DRIVER)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """Two nodes of three GPUs; every node has the image, so where a replacement lands is
    decided by podmedic's preference, not by image locality."""
    timings = SimTimings(image_pull_s=0.5, container_start_s=0.05, kubelet_report_s=0.05, backoff_base_s=0.1,
                         backoff_max_s=0.5, workload_step_s=0.05, checkpoint_save_s=0.05, progress_write_s=0.1,
                         termination_grace_s=0.1, job_requeue_s=0.02)
    cluster = SimCluster(SimConfig(nodes=2, devices_per_node=3, preloaded_images=[IMAGE], timings=timings))
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("recover") / "kubeconfig")
    yield cluster
    cluster.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    assert sim.kubeconfig_path is not None
    yield config.new_client_from_config(str(sim.kubeconfig_path))


@pytest.fixture(scope="module")
def admission(sim: SimCluster, api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``podmedic admission`` on a free port, registered as the deploy/ manifest registers it (the same
    configuration: tests/deploy checks it), but by URL (the simulator runs no Services) and without a
    caBundle: the process writes its CA."""
    port, certs = _free_port(), tmp_path_factory.mktemp("admission-tls")
    client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(placement_webhook_configuration(
        WEBHOOK, {"url": f"https://127.0.0.1:{port}{PATH}"}, ["podmedic", "kube-system"]))
    log = certs / "admission.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "admission", "--kubeconfig", str(sim.kubeconfig_path),
             "--listen", f"127.0.0.1:{port}", "--self-signed-dir", str(certs), "--extra-names", "127.0.0.1",
             "--webhook-configuration", WEBHOOK], stdout=out, stderr=subprocess.STDOUT)

    def serving() -> bool | None:
        hook = client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(WEBHOOK).webhooks[0]
        if not hook.client_config.ca_bundle:
            return None
        context = ssl.create_default_context(cadata=base64.b64decode(hook.client_config.ca_bundle).decode())
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as r:
                return r.status == 200 or None
        except OSError:
            return None

    try:
        wait_until(serving, timeout=30, what="podmedic admission serving with its CA in the configuration")
    except AssertionError:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"podmedic admission did not come up:\n{log.read_text()}") from None
    yield proc
    proc.terminate()
    proc.wait(timeout=10)


@pytest_asyncio.fixture(loop_scope="session")
async def worker(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str) -> AsyncIterator[tuple[Client, str]]:
    """The real worker against the simulator, on a fresh task queue, speaking as its ServiceAccount under
    deploy/'s RBAC (a call its ClusterRole does not grant is a 403)."""
    kube = KubeGateway(as_component(sim, "worker"))
    async with build_worker(dev_env.client, task_queue, kube):
        yield dev_env.client, task_queue
    kube.close()


def pods_of(sim: SimCluster, job: str) -> list[dict[str, Any]]:
    """The simulator's view of a job's pods."""
    return [p for p in sim.state()["pods"] if p.get("job") == job]


def ready_pod(sim: SimCluster, pick: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """Wait for a Ready pod (with a device) that ``pick`` accepts."""
    def find() -> dict[str, Any] | None:
        found = [p for p in sim.state()["pods"] if p["ready"] and p["devices"] and not p["deleting"] and pick(p)]
        return found[0] if found else None

    return wait_until(find, timeout=30, what=what)


async def start_job(sim: SimCluster, **options: Any) -> tuple[str, dict[str, Any]]:
    """A training Job (options: see ``create_training_job``) and its first Ready pod."""
    name = f"train-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(name, image=IMAGE, **options))
    pod = await asyncio.to_thread(ready_pod, sim, lambda p: p.get("job") == name, f"a Ready pod of {name}")
    return name, pod


async def wait_progress(sim: SimCluster, job: str, steps: int) -> None:
    """Let the job make ``steps`` steps, so checkpoints and progress have something to show."""
    def step() -> int:
        return int(next(j for j in sim.state()["jobs"] if j["name"] == job)["step"])

    start = step()
    await asyncio.to_thread(wait_until, lambda: step() >= start + steps or None, timeout=20, what="progress")


def block_node(sim: SimCluster, node: str, devices: int) -> str:
    """Occupy ``devices`` GPUs of ``node`` with a pinned job; returns its name."""
    name = f"blocker-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(name, image=IMAGE, devices_per_pod=devices, node_name=node,
                                                    checkpoint_method=None, prefer_node_label=False))
    ready_pod(sim, lambda p: p.get("job") == name, f"{name} running")
    return name


def delete_job(sim: SimCluster, name: str) -> None:
    sim.call(lambda: sim.store.delete("jobs", "default", name))

    def gone() -> bool | None:
        return not [p for p in sim.state()["pods"] if p.get("job") == name] or None

    wait_until(gone, timeout=10, what=f"{name}'s pods gone")


def fault(sim: SimCluster, pod: dict[str, Any], *, clears_on_restart: bool = True, code: int = 31) -> None:
    """The pod's device turns Unhealthy (XID ``code``, 31 by default); a restart heals it when
    ``clears_on_restart``."""
    driver, pool, device = pod["devices"][0].split("/")
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=code, message=f"XID {code}",
                          clears_on_restart=clears_on_restart)


async def incident(client: Client, task_queue: str, pod: dict[str, Any], driver_policy: Any,
                   code: int = 31) -> IncidentOutcome:
    """Open the incident of the pod's device as a detector would, and wait for its outcome."""
    driver, pool, device = pod["devices"][0].split("/")
    ref = DeviceRef(driver=driver, pool=pool, device=device)
    event = DeviceHealthEvent(device=ref, health=Health.UNHEALTHY, node=pod["node"], reason="XidError", code=code,
                              message=f"XID {code}", source="test", observed_at=dt.datetime.now(dt.UTC),
                              event_id=uuid.uuid4().hex,
                              pod=PodKey(namespace=pod["namespace"], name=pod["name"], uid=pod["uid"]))
    handle = await client.start_workflow(
        DeviceIncidentWorkflow.run, IncidentInput(device=ref, policy_ref=ref_of(driver_policy)), id=ref.workflow_id,
        task_queue=task_queue, start_signal="health_event", start_signal_args=[event],
        memo={POLICY_MEMO: pack(driver_policy)},
        id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
    )
    return await asyncio.wait_for(handle.result(), timeout=90)


def notes(outcome: IncidentOutcome, step: str = "recover") -> str:
    """The timeline lines of a step, one per line, for assertions and their messages."""
    return "\n".join(e.message for e in outcome.timeline if e.step == step)


def podmedic_events(sim: SimCluster, pod: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """podmedic's Events on the pod, as a kubectl user reads them (``kubectl events --for pod/NAME``; the
    replacement of a recreated pod has the same name, so the pod's UID picks its own): reason -> (type,
    message)."""
    assert sim.kubeconfig_path is not None
    done = run_kubectl(sim.kubeconfig_path, "events", "-n", pod["namespace"], "--for", f"pod/{pod['name']}",
                       "-o", "json")
    assert done.returncode == 0, f"kubectl events failed: {done.stderr}"
    events = json.loads(done.stdout)["items"]
    return {e["reason"]: (e["type"], e["message"]) for e in events
            if e["involvedObject"].get("uid") == pod["uid"] and e["reason"].startswith("Podmedic")}


def described(sim: SimCluster, pod: dict[str, Any]) -> str:
    """``kubectl describe pod``: what an operator reads first."""
    assert sim.kubeconfig_path is not None
    done = run_kubectl(sim.kubeconfig_path, "describe", "pod", "-n", pod["namespace"], pod["name"])
    assert done.returncode == 0, f"kubectl describe failed: {done.stderr}"
    return done.stdout
