"""One incident run end to end with telemetry installed: ingest HTTP -> workflow -> activities.

The module fixture installs podmedic's telemetry with in-memory exporters (and a Prometheus
endpoint on a free port), runs the real worker and the ingest's HTTP front against the dev
server and the simulator, posts a device failure and a repeat, and waits for the incident
to close. The tests then read what was exported.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.policy_file import parse_policy
from podmedic.kube.gateway import KubeGateway
from podmedic.telemetry import Telemetry, TelemetrySettings, install
from podmedic.telemetry.open_incidents import OpenIncidents
from podmedic.temporal.connect import connect
from podmedic_sim import SimCluster
from tests.helpers import served_sim, wait_until
from workers.ingest.service import run_ingest
from workers.ingest.settings import HttpSettings, IngestSettings
from workers.worker.main import build_worker
from workflows.device.incident import DeviceIncidentWorkflow

POLICY = parse_policy("""
drivers:
  default:
    checkpoint: {timeout_s: 5, poll_s: 0.2}
    recovery:
      transient:
        - {action: in_place_restart, timeout_s: 6}
      permanent:
        - {action: same_node, timeout_s: 20}
      verify_poll_s: 0.2
    close: {heal_wait_s: 1, anti_flap_s: 1, poll_s: 0.3}
  gpu.nvidia.com:
    classification: {codes: {permanent: [79], container_code: [13, 31, 43]}}
""")


@dataclass
class Run:
    """What the module's incident left behind."""

    telemetry: Telemetry
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    resource_id: str
    node: str
    outcome: IncidentOutcome
    open_while_running: dict[tuple[str, str, str], int]
    open_after: dict[tuple[str, str, str], int]
    statuses: list[int] = field(default_factory=list)
    ages_while_running: dict[tuple[str, str, str], float] = field(default_factory=dict)
    ages_after: dict[tuple[str, str, str], float] = field(default_factory=dict)
    seconds_since_post: float = 0.0


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("otel")) as cluster:
        yield cluster


def _event(resource_id: str, node: str, code: int, message: str) -> dict[str, Any]:
    driver, pool, device = resource_id.split("/")
    return {"specversion": "1.0", "id": uuid.uuid4().hex, "source": "test", "type": "io.podmedic.device.health.v1",
            "time": dt.datetime.now(dt.UTC).isoformat(),
            "data": {"driver": driver, "pool": pool, "device": device, "node": node, "health": "Unhealthy",
                     "code": code, "message": message}}


async def _count_until(counter: OpenIncidents, wanted: Any, what: str) -> dict[tuple[str, str, str], int]:
    for _ in range(100):
        counts = dict(await counter.refresh())
        if wanted(counts):
            return counts
        await asyncio.sleep(0.2)
    raise AssertionError(f"open-incident count never showed {what}: {counts}")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def run(dev_env: WorkflowEnvironment, sim: SimCluster) -> AsyncIterator[Run]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry = install(TelemetrySettings(service_name="podmedic-test", prometheus_host="127.0.0.1",
                                          prometheus_port=0), metric_readers=[reader], span_exporter=spans)
    client = await connect(dev_env.client.service_client.config.target_host, dev_env.client.namespace)
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    name = f"train-{uuid.uuid4().hex[:6]}"
    sim.call(lambda: sim.engine.create_training_job(name, image=f"registry.local/{name}:1"))
    pod = wait_until(lambda: next((p for p in sim.state()["pods"] if p.get("job") == name and p.get("ready")), None),
                     timeout=30, what="a Ready training pod")
    resource_id, node = pod["devices"][0], pod["node"]
    driver, pool, device = resource_id.split("/")
    stop = asyncio.Event()
    ready: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    settings = IngestSettings(http=HttpSettings(port=0, allow_unauthenticated=True))
    ingest = asyncio.create_task(run_ingest(client, kube, POLICY, settings, task_queue, stop, watch=False,
                                            on_ready=ready.set_result))
    counter = OpenIncidents(client, telemetry.meter_provider.get_meter("podmedic"))  # type: ignore[union-attr]
    statuses = []
    async with build_worker(client, task_queue, kube):
        url = await ready
        posted = time.monotonic()
        # A hardware fault (transient, not in the table) that a restart clears: the incident reports to its
        # node's watch, which the open-incidents gauge counts (a workload's XID would not: no watch).
        sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=94,
                              message="XID 94: contained ECC error", clears_on_restart=True)
        async with aiohttp.ClientSession() as http:
            for body, ctype in ((_event(resource_id, node, 94, "XID 94: contained ECC error"),
                                 "application/cloudevents+json"),
                                (_event(resource_id, node, 43, "XID 43: reset channel"),
                                 "application/cloudevents+json"),
                                ({"not": "an event"}, "text/plain")):
                async with http.post(f"{url}/v1/events", json=body, headers={"Content-Type": ctype}) as response:
                    statuses.append(response.status)
        open_while_running = await _count_until(
            counter, lambda c: any(k[:2] == ("device", driver) and n > 0 for k, n in c.items()), "the incident open")
        ages_while_running, since_post = counter.ages(), time.monotonic() - posted
        handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{resource_id}")
        outcome = await asyncio.wait_for(handle.result(), timeout=90)
        open_after = await _count_until(
            counter, lambda c: all(n == 0 for k, n in c.items() if k[:2] == ("device", driver)), "the incident closed")
        stop.set()
        await ingest
    kube.close()
    telemetry.flush()
    yield Run(telemetry, spans, reader, resource_id, node, outcome, open_while_running, open_after, statuses,
              ages_while_running, counter.ages(), since_post)
    telemetry.shutdown()
