"""Fixtures of the cluster-source tests: a simulator, the real client, sources run in threads."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster
from podmedic_sim.config import DriverPlugin
from tests.helpers import wait_until
from tests.simkit import fast_config, gpu_pod, gpu_template, serving, unmodified_client
from workers.ingest.sources import ClusterSource, Observation

DRIVER = "gpu.nvidia.com"


class Running:
    """A source running in its own thread, as the ingest service runs it, collecting what it emits.

    ``emit`` returns at once (delivery is instant here); ``fail`` makes it raise for chosen
    observations, as the service's emit does when it cannot deliver.
    """

    def __init__(self, source: ClusterSource, fail: Callable[[Observation], bool] | None = None) -> None:
        self.source = source
        self.seen: list[Observation] = []
        self.listed: list[Observation] = []
        """What was emitted from a list (``Emit``'s ``listed``), not a watch event."""
        self.fail = fail
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=source.run, args=(self._emit, self.stop), daemon=True,
                                       name=f"test-{source.name}")
        self.thread.start()

    def _emit(self, obs: Observation, *, listed: bool = False) -> None:
        if self.fail is not None and self.fail(obs):
            raise RuntimeError(f"cannot deliver {obs.event_id}")
        with self._lock:
            self.seen.append(obs)
            if listed:
                self.listed.append(obs)

    def matching(self, predicate: Callable[[Observation], bool]) -> list[Observation]:
        """What was emitted so far and matches ``predicate``."""
        with self._lock:
            return [o for o in self.seen if predicate(o)]

    def wait_for(self, predicate: Callable[[Observation], bool], *, count: int = 1, timeout: float = 10.0,
                 what: str = "") -> list[Observation]:
        """Wait until ``count`` emitted observations match ``predicate``; returns them."""
        def enough() -> list[Observation] | None:
            found = self.matching(predicate)
            return found if len(found) >= count else None

        return wait_until(enough, timeout=timeout, what=what or "observations")

    def ready(self, timeout: float = 10.0) -> None:
        """Wait until the source has listed (or resumed) and is watching."""
        wait_until(lambda: self.source.stats.watches > 0, timeout=timeout, what=f"{self.source.name} watching")

    def quiet(self, seconds: float = 0.5) -> list[Observation]:
        """Everything emitted after waiting ``seconds`` more (to show nothing else comes)."""
        time.sleep(seconds)
        with self._lock:
            return list(self.seen)

    def close(self) -> None:
        """Stop the source and wait for its thread."""
        self.stop.set()
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), f"{self.source.name} did not stop"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A behaving simulator with fast timings and frequent bookmarks, whose GPU driver sends health
    messages (ResourceHealth.message, with the kubelet's ResourceHealthStatusMessage gate on): these
    tests read what the sources make of them. The
    default driver sends none (tests/e2e_sim, tests/e2e_stack)."""
    plugins = {"gpu.nvidia.com": DriverPlugin(cdi_ids="per-device", health_messages=True)}
    cluster = SimCluster(fast_config(nodes=2, devices_per_node=4, plugins=plugins), bookmark_interval_s=0.1)
    yield from serving(cluster, tmp_path_factory.mktemp("sources") / "kubeconfig")


@pytest.fixture(scope="module")
def kube(sim: SimCluster) -> Iterator[KubeGateway]:
    """podmedic's gateway on the simulator's kubeconfig."""
    assert sim.kubeconfig_path is not None
    gateway = KubeGateway(Path(sim.kubeconfig_path))
    yield gateway
    gateway.close()


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    """The unmodified ``kubernetes`` client, to create what the tests need."""
    yield from unmodified_client(sim)


@pytest.fixture
def run_source() -> Iterator[Callable[..., Running]]:
    """Start sources in threads; every one still running is stopped at the end of the test."""
    started: list[Running] = []

    def start(source: ClusterSource, fail: Callable[[Observation], bool] | None = None) -> Running:
        running = Running(source, fail)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.thread.is_alive():
            running.close()


def free_devices(sim: SimCluster) -> list[tuple[str, str, str]]:
    """Devices no pod holds and no test tainted or faulted, lowest first."""
    return [(d["driver"], d["pool"], d["device"]) for d in sim.state()["devices"]
            if d["driver"] == DRIVER and not d["allocated_to"] and not d["taints"] and d["health"] == "Healthy"
            and not d.get("prepare_failure")]


def start_pod(sim: SimCluster, api: client.ApiClient, count: int = 1, namespace: str = "default",
              ready: bool = True) -> dict[str, Any]:
    """A pod with ``count`` devices from a fresh ResourceClaimTemplate; its ``sim.state()`` entry."""
    name = f"p-{uuid.uuid4().hex[:6]}"
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(
        namespace, gpu_template(f"{name}-gpu", namespace=namespace, count=count))
    client.CoreV1Api(api).create_namespaced_pod(namespace, gpu_pod(name, namespace=namespace, template=f"{name}-gpu"))

    def found() -> dict[str, Any] | None:
        pods = [p for p in sim.state()["pods"] if p["name"] == name and len(p["devices"]) == count
                and (p["ready"] or not ready)]
        return pods[0] if pods else None

    return wait_until(found, timeout=15, what=f"pod {name} with {count} device(s)")
