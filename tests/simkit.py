"""Helpers for tests that drive a ``SimEngine`` directly on the current event loop, or serve a
``SimCluster`` over HTTP to the unmodified ``kubernetes`` client."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config

from podmedic_sim import SimCluster
from podmedic_sim.config import SimConfig, SimTimings
from podmedic_sim.engine import SimEngine
from podmedic_sim.store import Store

T = TypeVar("T")

FAST = SimTimings(
    image_pull_s=0.3,
    container_start_s=0.02,
    kubelet_report_s=0.05,
    backoff_base_s=0.1,
    backoff_max_s=0.4,
    scheduler_interval_s=0.02,
    workload_step_s=0.05,
    checkpoint_save_s=0.1,
    crash_after_s=0.02,
    termination_grace_s=0.05,
    job_requeue_s=0.01,
    progress_write_s=0.2,
    eviction_interval_s=0.02,
)


def fast_config(**overrides: Any) -> SimConfig:
    """A small cluster (2 nodes x 4 GPUs) with timings in tens of milliseconds."""
    values: dict[str, Any] = {"nodes": 2, "devices_per_node": 4, "timings": FAST}
    values.update(overrides)
    return SimConfig(**values)


@contextlib.asynccontextmanager
async def running_engine(config: SimConfig | None = None) -> AsyncIterator[SimEngine]:
    """A bootstrapped engine whose components run until the block exits."""
    engine = SimEngine(Store(), config or fast_config())
    engine.bootstrap()
    task = asyncio.create_task(engine.run())
    try:
        yield engine
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_until(
    check: Callable[[], T | None], timeout: float = 5.0, what: str = "condition"
) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


def gpu_template(
    name: str = "gpu",
    namespace: str = "default",
    count: int = 1,
    tolerations: list[dict[str, Any]] | None = None,
    driver: str = "gpu.nvidia.com",
) -> dict[str, Any]:
    """A ResourceClaimTemplate asking for ``count`` devices of ``driver``."""
    exactly: dict[str, Any] = {"deviceClassName": driver, "count": count}
    if tolerations:
        exactly["tolerations"] = tolerations
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def gpu_pod(
    name: str,
    namespace: str = "default",
    template: str = "gpu",
    image: str = "registry.local/app:1",
    restart_policy: str = "Always",
    **spec: Any,
) -> dict[str, Any]:
    """A one-container pod using a claim from ``template``; ``spec`` adds pod spec fields."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [
                {"name": "main", "image": image, "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            **spec,
        },
    }


def serving(cluster: SimCluster, kubeconfig: Path) -> Iterator[SimCluster]:
    """``cluster`` serving over HTTP, its kubeconfig written to ``kubeconfig``; stopped after (a fixture's body)."""
    cluster.start(kubeconfig_path=kubeconfig)
    try:
        yield cluster
    finally:
        cluster.stop()


def unmodified_client(sim: SimCluster) -> Iterator[client.ApiClient]:
    """The unmodified ``kubernetes`` ApiClient on ``sim``'s kubeconfig; closed after (a fixture's body)."""
    assert sim.kubeconfig_path is not None
    api_client = config.new_client_from_config(str(sim.kubeconfig_path))
    try:
        yield api_client
    finally:
        api_client.close()
