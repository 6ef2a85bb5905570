"""End to end: the cluster watch sources open the right incidents.

The Temporal dev server, the simulator over HTTP, the real worker, and the cluster sources
run by ``workers.ingest.service.run_sources`` into a ``Deliverer``, as ``podmedic ingest`` runs
them. Each test picks devices that no pod, fault or open incident uses, and its incidents
are terminated when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from podmedic.domain.incident import IncidentState
from podmedic.domain.models import DeviceRef, FailureMode, Health, Outcome, Permanence
from podmedic.kube import podview
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.resource_ids import pod_device_health
from podmedic_sim import SimCluster
from tests.e2e_ingest.conftest import SourceSet
from tests.helpers import assert_eventually, served_sim, wait_until
from tests.simkit import gpu_pod, gpu_template
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.pod_reports.config_incident import ConfigIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
DRIVER = "gpu.nvidia.com"
BAD_CONFIG = "invalid opaque config: unknown field sharingStrategy"
DEVICE_FAULT = "device is unhealthy: XID 79, GPU has fallen off the bus"
Device = tuple[str, str, str]


@pytest.fixture(scope="module")
def ingest_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """This module's cluster: 2 nodes x 8 devices, fast timings, bookmarks every 0.2 s."""
    with served_sim(tmp_path_factory.mktemp("e2e-sources"), devices_per_node=8, bookmark_interval_s=0.2,
                    image_pull_s=0.3, backoff_base_s=0.2, backoff_max_s=0.8) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def api(ingest_sim: SimCluster) -> Iterator[k8s.ApiClient]:
    api_client = k8s_config.new_client_from_config(str(ingest_sim.kubeconfig_path))  # type: ignore[no-untyped-call]
    yield api_client
    api_client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def clean(ingest_sim: SimCluster, api: k8s.ApiClient, ingest_worker: tuple[Client, str]
                ) -> AsyncIterator[list[Device]]:
    """Devices this test faults (slice taints, prepare failures) and its taint rules: cleared at the end,
    after its incidents are stopped (so none taints again)."""
    touched: list[Device] = []
    yield touched
    client, task_queue = ingest_worker
    async for wf in client.list_workflows(f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'"):
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(wf.id, run_id=wf.run_id).terminate("test over")
    for driver, pool, device in touched:
        ingest_sim.set_prepare_failure(driver, pool, device, clear=True)
        for taint in ("gpu.nvidia.com/xid", "gpu.nvidia.com/gpu-lost"):
            ingest_sim.set_slice_taint(driver, pool, device, taint, remove=True)
        ingest_sim.set_device_health(driver, pool, device, "Healthy")
    for rule in ingest_sim.state()["taint_rules"]:
        k8s.ResourceV1Api(api).delete_device_taint_rule(rule["name"])


def _device(resource_id: str) -> Device:
    driver, pool, device = resource_id.split("/")
    return driver, pool, device


async def _open(client: Client, wid: str) -> bool:
    try:
        return (await client.get_workflow_handle(wid).describe()).status == WorkflowExecutionStatus.RUNNING
    except RPCError:
        return False


async def free_devices(sim: SimCluster, client: Client, n: int | None = None) -> list[Device]:
    """``n`` (default: all) devices with no pod, taint, fault or open incident (from earlier tests or modules)."""
    found: list[Device] = []
    for d in sim.state()["devices"]:
        if (d["driver"] == DRIVER and not d["allocated_to"] and not d["taints"] and d["health"] == "Healthy"
                and not d["prepare_failure"] and not await _open(client, f"device/{DRIVER}/{d['pool']}/{d['device']}")):
            found.append((d["driver"], d["pool"], d["device"]))
        if len(found) == n:
            return found
    if n is None and found:
        return found
    raise AssertionError(f"fewer than {n or 1} free devices")


async def incident(client: Client, task_queue: str, device: Device | str) -> IncidentState:
    """The device's incident opened on this test's task queue, once classified."""
    wid = f"device/{device if isinstance(device, str) else '/'.join(device)}"

    async def classified() -> IncidentState:
        try:
            handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, wid)
            described = await handle.describe()
            assert described.task_queue == task_queue, f"{wid} is another test's incident"
            state = await handle.query(DeviceIncidentWorkflow.get_state)
        except RPCError as exc:
            raise AssertionError(f"no incident {wid} yet: {exc}") from exc
        assert state.failure_mode is not None, state
        return state

    return await assert_eventually(classified, timeout=30)


async def runs(client: Client, task_queue: str, wid: str) -> int:
    """Workflows ever started with id ``wid`` on this test's task queue."""
    return (await client.count_workflows(f"WorkflowId = '{wid}' AND TaskQueue = '{task_queue}'")).count


def start_pod(sim: SimCluster, api: k8s.ApiClient, *, ready: bool = True) -> dict[str, Any]:
    """A bare pod using one device; its ``sim.state()`` entry once it has the device (and runs)."""
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    k8s.ResourceV1Api(api).create_namespaced_resource_claim_template("default", gpu_template(f"{name}-gpu"))  # type: ignore[arg-type]
    k8s.CoreV1Api(api).create_namespaced_pod("default", gpu_pod(name, template=f"{name}-gpu"))  # type: ignore[arg-type]

    def found() -> dict[str, Any] | None:
        pods = [p for p in sim.state()["pods"] if p["name"] == name and p["devices"] and (p["ready"] or not ready)]
        return pods[0] if pods else None

    return wait_until(found, timeout=20, what=f"pod {name}")


def prepare_count(api: k8s.ApiClient, pod: str) -> int:
    events = k8s.CoreV1Api(api).list_namespaced_event(
        "default", field_selector=f"reason=FailedPrepareDynamicResources,involvedObject.name={pod}").items
    return max((e.count or 0 for e in events), default=0)


@pytest.mark.parametrize(("key", "value", "effect", "named"), [
    ("gpu.nvidia.com/xid", "79", "NoSchedule", "79"),  # the XID code read from the taint value
    ("gpu.nvidia.com/gpu-lost", "", "None", "gpu-lost"),  # effect None still reports a fault
])
async def test_slice_taint_opens_a_permanent_device_failure(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet],
    clean: list[Device], key: str, value: str, effect: str, named: str,
) -> None:
    client, task_queue = ingest_worker
    sources = source_sets()
    await sources.watching()
    [device] = await free_devices(ingest_sim, client, 1)
    clean.append(device)
    ingest_sim.set_slice_taint(*device, key, value, effect)
    state = await incident(client, task_queue, device)
    assert (state.failure_mode, state.permanence) == (FailureMode.DEVICE_FAILED, Permanence.PERMANENT), state.why
    assert named in state.why and state.node == device[1]


async def test_bad_config_prepare_failure_is_reported_on_the_pod_once_and_taints_nothing(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet],
    clean: list[Device], api: k8s.ApiClient,
) -> None:
    client, task_queue = ingest_worker
    rules: list[str] = []
    unsubscribe = ingest_sim.call(ingest_sim.store.add_listener, lambda e: rules.append(e.obj["metadata"]["name"])
                                  if e.resource == "devicetaintrules" else None)
    sources = source_sets()
    await sources.watching()
    for device in await free_devices(ingest_sim, client):
        ingest_sim.set_prepare_failure(*device, BAD_CONFIG)
        clean.append(device)
    pod = start_pod(ingest_sim, api, ready=False)
    wid = f"config/default/{pod['name']}/{pod['uid']}"

    handle = client.get_workflow_handle_for(ConfigIncidentWorkflow.run, wid)
    outcome = await assert_eventually(lambda: _result(handle), timeout=30)
    assert outcome.outcome is Outcome.REPORTED and outcome.failure_mode is FailureMode.BAD_CONFIG
    assert outcome.reported_on_pod and BAD_CONFIG in outcome.explanation
    kube = KubeGateway(Path(str(ingest_sim.kubeconfig_path)))
    try:
        notes = podview.annotations_of(kube.get_pod("default", pod["name"]) or {"metadata": {}})
    finally:
        kube.close()
    assert notes.get("podmedic.io/problem", "").startswith("bad_config:") and BAD_CONFIG in notes["podmedic.io/problem"]
    notices = k8s.CoreV1Api(api).list_namespaced_event(
        "default", field_selector=f"reason=PodmedicBadConfig,involvedObject.name={pod['name']}").items
    assert len(notices) == 1 and BAD_CONFIG in (notices[0].message or "")

    # The kubelet keeps retrying; still one report, no device incident, no DeviceTaintRule.
    await asyncio.to_thread(wait_until, lambda: prepare_count(api, pod["name"]) >= 5, timeout=15,
                            what="the kubelet's retries")
    await asyncio.sleep(0.5)
    assert await runs(client, task_queue, wid) == 1
    assert await runs(client, task_queue, f"device/{pod['devices'][0]}") == 0
    ingest_sim.call(unsubscribe)
    assert rules == [], "no DeviceTaintRule was created"
    assert not [r for r in ingest_sim.state()["taint_rules"]
                if r["spec"]["deviceSelector"].get("pool") == pod["devices"][0].split("/")[1]
                and r["spec"]["deviceSelector"].get("device") == pod["devices"][0].split("/")[2]]
    assert sources.deliverer.delivered == 1


async def _result(handle: Any) -> Any:
    try:
        return await asyncio.wait_for(handle.result(), timeout=20)
    except RPCError as exc:
        raise AssertionError(f"not started yet: {exc}") from exc


async def test_device_prepare_failure_opens_the_device_incident(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet],
    clean: list[Device], api: k8s.ApiClient,
) -> None:
    client, task_queue = ingest_worker
    sources = source_sets()
    await sources.watching()
    for device in await free_devices(ingest_sim, client):
        ingest_sim.set_prepare_failure(*device, DEVICE_FAULT)
        clean.append(device)
    pod = start_pod(ingest_sim, api, ready=False)
    state = await incident(client, task_queue, pod["devices"][0])
    assert state.failure_mode is FailureMode.DEVICE_FAILED and state.permanence is Permanence.PERMANENT, state.why
    assert any("FailedPrepareDynamicResources" in t.message for t in state.timeline), state.timeline


async def test_an_ingest_restart_between_two_events_loses_neither(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet],
    clean: list[Device], api: k8s.ApiClient, tmp_path: Path,
) -> None:
    client, task_queue = ingest_worker
    first = source_sets(state_dir=tmp_path)
    await first.watching()
    pod_a, pod_b = start_pod(ingest_sim, api), start_pod(ingest_sim, api)
    dev_a, dev_b = (_device(p["devices"][0]) for p in (pod_a, pod_b))
    clean.extend([dev_a, dev_b])
    ingest_sim.set_device_health(*dev_a, "Unhealthy", reason="XidError", message="XID 79: fallen off the bus")
    await incident(client, task_queue, pod_a["devices"][0])
    await first.stop()
    assert (tmp_path / "watch-pod-status.json").exists()

    ingest_sim.set_device_health(*dev_b, "Unhealthy", reason="XidError", message="XID 48: double-bit ECC error")
    kube = KubeGateway(Path(str(ingest_sim.kubeconfig_path)))
    try:
        def reported_b() -> bool:
            pod = kube.get_pod("default", pod_b["name"]) or {}
            health = pod_device_health(pod, lambda name: kube.get_claim("default", name)).devices
            return health[DeviceRef.parse(pod_b["devices"][0])][0] is Health.UNHEALTHY

        await asyncio.to_thread(wait_until, reported_b, timeout=10, what="the kubelet reporting B")
    finally:
        kube.close()
    await asyncio.sleep(0.3)
    assert not await _open(client, f"device/{pod_b['devices'][0]}"), "nothing delivers while the ingest is down"

    second = source_sets(state_dir=tmp_path)
    state = await incident(client, task_queue, pod_b["devices"][0])
    # Pod status says Unhealthy and nothing more (the driver sends no message): B's event is the watch's.
    assert any(t.message.startswith("pod-status: Unhealthy") for t in state.timeline), state.timeline
    watcher = second.source("pod-status")
    assert watcher.stats.resumed_from is not None and watcher.stats.lists == 0, watcher.stats
    wid_a = f"device/{pod_a['devices'][0]}"
    assert await runs(client, task_queue, wid_a) == 1, [
        (w.run_id, w.status, w.start_time, w.close_time)
        async for w in client.list_workflows(f"WorkflowId = '{wid_a}'")]


async def test_two_ingest_replicas_open_one_workflow_per_device(
    ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet],
    clean: list[Device],
) -> None:
    client, task_queue = ingest_worker
    replicas = [source_sets(), source_sets()]
    for replica in replicas:
        await replica.watching()
    devices = await free_devices(ingest_sim, client, 2)
    clean.extend(devices)
    for device in devices:
        ingest_sim.set_slice_taint(*device, "gpu.nvidia.com/xid", "79", "None")
    for device in devices:
        await incident(client, task_queue, device)

    async def both_replicas_delivered() -> None:
        assert all(r.deliverer.delivered + r.deliverer.deduplicated >= 2 for r in replicas), \
            [(r.deliverer.delivered, r.deliverer.deduplicated) for r in replicas]
    await assert_eventually(both_replicas_delivered, timeout=15)
    await asyncio.sleep(0.5)
    for device in devices:
        assert await runs(client, task_queue, f"device/{'/'.join(device)}") == 1
