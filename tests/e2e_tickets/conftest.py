"""Fixtures for the vendor-ticket end-to-end tests: simulator, ingest HTTP front, fake ticket
systems, the worker in process or as a real subprocess (to SIGKILL it)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster, SimConfig
from podmedic_sim.config import SimTimings
from workers.ingest.service import run_ingest
from workers.ingest.settings import IngestSettings
from workers.worker.main import build_worker

# Secrets every test's worker gets; none may ever appear in a workflow history.
SECRETS = {
    "PODMEDIC_TICKET_SECRET": "hmac-secret-7f3a",
    "PODMEDIC_TICKET_TOKEN": "webhook-token-91bc",
    "PODMEDIC_JIRA_TOKEN": "jira-token-55de",
    "PODMEDIC_SERVICENOW_PASSWORD": "sn-password-c0ff",
}
INGEST_TOKEN = "ingest-token-ab12"


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """Four nodes of four GPUs, fast timings; one for the whole package, so a device (and its
    incident's workflow id) is used by one test only."""
    timings = SimTimings(image_pull_s=0.5, container_start_s=0.1, kubelet_report_s=0.1, backoff_base_s=0.3,
                         backoff_max_s=2.0, workload_step_s=0.1, checkpoint_save_s=0.1)
    cluster = SimCluster(SimConfig(nodes=4, devices_per_node=4, timings=timings))
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("e2e-tickets") / "kubeconfig")
    yield cluster
    cluster.stop()


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The credentials, in this process's environment (the in-process worker reads them there)."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return dict(SECRETS)


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on a free port; returns the runner and its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


@pytest_asyncio.fixture(loop_scope="session")
async def fakes() -> AsyncIterator[Any]:
    """``url = await fakes(desk)`` serves a fake ticket system until the test ends."""
    runners: list[tuple[Any, web.AppRunner]] = []

    async def start(desk: Any) -> str:
        runner, url = await serve(desk.app())
        runners.append((desk, runner))
        return url

    yield start
    for desk, runner in runners:
        desk.release.set()  # a held answer must not keep the server from stopping
        await runner.cleanup()


class Ingest:
    """The ingest's HTTP front (no cluster watches: each test names its devices by CloudEvent)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}

    async def fail(self, device: str, code: int | None = 79, message: str = "XID 79: GPU has fallen off the bus",
                   health: str = "Unhealthy") -> None:
        """Post a CloudEvent: ``device`` (driver/pool/device) is ``health`` with an XID ``code``."""
        driver, pool, name = device.split("/")
        event = {"specversion": "1.0", "id": uuid.uuid4().hex, "source": "test", "type": "io.podmedic.device.health.v1",
                 "data": {"driver": driver, "pool": pool, "device": name, "health": health, "code": code,
                          "message": message, "node": pool}}
        async with aiohttp.ClientSession() as session, session.post(
                f"{self.url}/v1/events", json=event,
                headers={**self.headers, "Content-Type": "application/cloudevents+json"}) as resp:
            assert resp.status == 202, await resp.text()

    async def post(self, events: list[dict[str, Any]]) -> None:
        """Post a CloudEvents batch (what the node agent sends)."""
        async with aiohttp.ClientSession() as session, session.post(
                f"{self.url}/v1/events", json=events,
                headers={**self.headers, "Content-Type": "application/cloudevents-batch+json"}) as resp:
            assert resp.status == 202, await resp.text()

    async def resolved(self, ticket: str, body: dict[str, Any] | None = None, token: str | None = INGEST_TOKEN,
                       ) -> tuple[int, dict[str, Any]]:
        """``POST /v1/tickets/{ticket}/resolved``; returns status and JSON answer."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with aiohttp.ClientSession() as session, session.post(
                f"{self.url}/v1/tickets/{ticket}/resolved", json=body, headers=headers) as resp:
            return resp.status, await resp.json()


@pytest_asyncio.fixture(loop_scope="session")
async def ingest(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str,
                 tmp_path: Path) -> AsyncIterator[Any]:
    """``front = await ingest(policy)`` starts the ingest HTTP front with that policy."""
    stops: list[tuple[asyncio.Event, asyncio.Task[None]]] = []
    token_file = tmp_path / "ingest-token"
    token_file.write_text(INGEST_TOKEN)
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))

    async def start(policy: PolicySet) -> Ingest:
        ready: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        settings = IngestSettings.model_validate({"http": {"port": 0, "token_file": str(token_file)}})
        stop = asyncio.Event()
        task = asyncio.create_task(run_ingest(dev_env.client, kube, policy, settings, task_queue, stop, watch=False,
                                              on_ready=ready.set_result))
        stops.append((stop, task))
        url = await asyncio.wait_for(ready, 10)
        assert url
        return Ingest(url)

    yield start
    for stop, task in stops:
        stop.set()
        await task
    kube.close()


@pytest_asyncio.fixture(loop_scope="session")
async def worker(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str,
                 secrets: dict[str, str]) -> AsyncIterator[Client]:
    """The real worker in this process, on the test's task queue."""
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    async with build_worker(dev_env.client, task_queue, kube):
        yield dev_env.client
    kube.close()


class WorkerProcess:
    """``podmedic worker`` as a subprocess, so a test can SIGKILL it mid-activity."""

    def __init__(self, address: str, task_queue: str, kubeconfig: str, log: Path) -> None:
        self.cmd = [str(Path(sys.executable).parent / "podmedic"), "worker", "--temporal-address", address,
                    "--task-queue", task_queue, "--kubeconfig", kubeconfig]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.others: list[WorkerProcess] = []

    def again(self) -> WorkerProcess:
        """Another worker like this one (same queue, same log); stopped with this one's fixture."""
        other = WorkerProcess("", "", "", self.log)
        other.cmd = list(self.cmd)
        self.others.append(other)
        return other

    def start(self) -> None:
        env = {**os.environ, **SECRETS}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=env, stdout=out, stderr=subprocess.STDOUT)

    def tail(self) -> str:
        """The end of the workers' log, for failure messages."""
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        for other in self.others:
            other.stop()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def worker_process(dev_env: WorkflowEnvironment, sim: SimCluster, task_queue: str,
                   tmp_path: Path) -> Iterator[WorkerProcess]:
    """A subprocess worker (not started yet) on the test's task queue."""
    proc = WorkerProcess(dev_env.client.service_client.config.target_host, task_queue, str(sim.kubeconfig_path),
                         tmp_path / "worker.log")
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def taken() -> set[str]:
    """Devices the package's tests already used (each test takes fresh ones)."""
    return set()
