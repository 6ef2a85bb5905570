"""Same node that holds, for JobSet, LeaderWorkerSet and StatefulSet pods, end to end.

Real parts: the Temporal dev server, the real worker, ``podmedic admission`` as its own process
serving HTTPS with its self-signed CA (which it writes into the MutatingWebhookConfiguration
itself), and the simulator running the JobSet, LeaderWorkerSet and StatefulSet controllers and
calling the webhook as the API server does (shapes and rules: podmedic_sim/jobsets.py,
leaderworkersets.py, statefulsets.py and admission.py cite their upstream sources). A device fails
under one pod of each workload; each incident must checkpoint the whole workload first, evict,
and see the controller's replacement pinned to the same node on another device, the workload's
own status running whole, and only then the ``same_node`` rung verified; a JobSet's other rank,
recreated with it, is kept off the node so it leaves the freed GPU to the replacement.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from temporalio.client import Client

from podmedic.domain.placement_holds import KEPT_OFF_BY, KEPT_OFF_NODE, PINNED_BY
from podmedic_sim import SimCluster
from podmedic_sim.training import in_place_jobset
from tests.e2e_recover.conftest import IMAGE, block_node, delete_job, fault, incident, notes, policy, ready_pod
from tests.helpers import clear_workloads

pytestmark = pytest.mark.asyncio(loop_scope="session")
NS = "default"
SAME = "[{action: same_node, timeout_s: 30}]"


@pytest.fixture(autouse=True)
def clean(sim: SimCluster) -> Iterator[None]:
    """Each test starts with every GPU free and healthy: workloads first (their controllers would
    replace the pods), then what they left."""
    yield

    clear_workloads(sim)


def _template(sim: SimCluster, name: str, restart_policy: str) -> dict[str, Any]:
    """A training pod template (checkpoint by annotation, one GPU by claim template), lent by a Job of no pods."""
    proto = sim.call(lambda: sim.engine.create_training_job(f"{name}-proto", parallelism=0, image=IMAGE,
                                                            prefer_node_label=False))
    template: dict[str, Any] = proto["spec"]["template"]
    template["spec"]["restartPolicy"] = restart_policy
    return template


def _create(api: client.ApiClient, group: str, version: str, plural: str, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, NS, plural, body)


def _get(api: client.ApiClient, group: str, version: str, plural: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(group, version, NS, plural, name)
    return found


def _pod(sim: SimCluster, name: str) -> dict[str, Any]:
    return ready_pod(sim, lambda p: p["name"] == name, f"{name} Ready with a device")


def _free(sim: SimCluster, blocker: str, pods: list[dict[str, Any]]) -> None:
    """The workload runs on node-0001; node-0000 has free GPUs again, and the scheduler breaks ties
    toward it (every node has the image): a replacement lands on node-0001 only if podmedic holds it there."""
    assert {p["node"] for p in pods} == {"node-0001"}, [p["node"] for p in pods]
    delete_job(sim, blocker)


def _start_jobset(sim: SimCluster, api: client.ApiClient, name: str, in_place: bool = False) -> list[dict[str, Any]]:
    """A JobSet of two 1-GPU ranks (backoffLimit 0, up to 3 restarts); its Ready pods, rank 0 first. With
    ``in_place``, as jobset's in-place example (site/static/examples/in-place-restart/
    jobset-main-container-mode.yaml): restartStrategy InPlaceRestart, backoffLimit MaxInt32,
    podReplacementPolicy Failed, the container restarted in place on any non-zero exit."""
    job: dict[str, Any] = {"spec": {"parallelism": 1, "backoffLimit": 0, "template": _template(sim, name, "Never")}}
    failure_policy: dict[str, Any] = {"maxRestarts": 3}
    if in_place:
        job, failure_policy = in_place_jobset(job, failure_policy)
    _create(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
        "spec": {"failurePolicy": failure_policy,
                 "replicatedJobs": [{"name": "node", "replicas": 2, "template": job}]}})
    return [ready_pod(sim, lambda p, j=f"{name}-node-{i}": p.get("job") == j, "a Ready JobSet pod") for i in range(2)]


def _api_pod(api: client.ApiClient, name: str) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    found: dict[str, Any] = core.api_client.sanitize_for_serialization(core.read_namespaced_pod(name, NS))
    return found


def _assert_held(sim: SimCluster, outcome: Any, failed: dict[str, Any], whole: int) -> Any:
    """The shared half of every scenario: the whole workload checkpointed before the eviction, the rung
    verified on the same node with another device, the hold proven first and the workload's status read.
    Returns the replacement (the incident's pod)."""
    recover = notes(outcome)
    # The device stays broken (it does not heal on a restart): recovered by same_node, device quarantined.
    assert outcome.recovered_by == "same_node", (outcome.outcome, recover)
    assert outcome.checkpoint.startswith(f"complete: {whole}/{whole}"), \
        (outcome.checkpoint, notes(outcome, "checkpoint"))
    order = [e.step for e in outcome.timeline]
    assert order.index("checkpoint") < order.index("recover"), order
    pod = outcome.pod
    assert pod is not None and pod.uid != failed["uid"] and pod.node == failed["node"], pod
    now = next(p for p in sim.state()["pods"] if p["uid"] == pod.uid)
    assert now["devices"] and failed["devices"][0] not in now["devices"], (failed["devices"], now["devices"])
    assert f"replacement held on {failed['node']}" in recover, recover
    assert "running whole again (its status)" in recover, recover
    return pod


async def test_a_jobset_pod_comes_back_on_its_node_after_the_jobset_restarts(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str]) -> None:
    """JobSet with backoffLimit 0 and a failurePolicy: evicting one pod fails its Job, and the JobSet
    controller recreates every Job (status.restarts 1). Only the replaced pod's Job is pinned."""
    temporal, queue = worker
    name = f"js-{uuid.uuid4().hex[:5]}"
    blocker = block_node(sim, "node-0000", 3)
    pods = _start_jobset(sim, api, name)
    _free(sim, blocker, pods)
    fault(sim, pods[0], clears_on_restart=False)
    outcome = await incident(temporal, queue, pods[0], policy(SAME))
    replacement = _assert_held(sim, outcome, pods[0], whole=2)
    assert f"JobSet {name} running whole" in notes(outcome)
    jobset = _get(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", name)
    assert jobset["status"]["restarts"] == 1, jobset["status"]
    assert f"JobSet {name}: of its 1 other pods, 0 kept (0 restarted in place), 1 recreated" in notes(outcome)
    assert _api_pod(api, replacement.name)["metadata"]["annotations"][PINNED_BY] == outcome.incident_id
    other = [p for p in sim.state()["pods"] if p.get("job") == f"{name}-node-1" and not p["deleting"]]
    assert other and all(PINNED_BY not in (_api_pod(api, p["name"])["metadata"].get("annotations") or {})
                         for p in other), "only the replaced pod's place is pinned"


async def test_an_in_place_jobset_keeps_its_other_rank_and_replaces_only_the_failed_one(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str]) -> None:
    """JobSet with restartStrategy InPlaceRestart (KEP-467): podmedic's eviction ends the failed rank's pod
    alone; its Job recreates it (held on the node, on a healthy GPU), and the JobSet's controller brings the
    other rank to the next attempt in place: same pod, its container restarted, no JobSet restart. Left to
    itself the failed rank would restart in place on its broken GPU (tests/sim/test_in_place_restart.py)."""
    temporal, queue = worker
    name = f"jsi-{uuid.uuid4().hex[:5]}"
    blocker = block_node(sim, "node-0000", 3)
    pods = _start_jobset(sim, api, name, in_place=True)
    _free(sim, blocker, pods)
    fault(sim, pods[0], clears_on_restart=False)
    # Recovered without reading the trainer's progress (a trainer that reports none): the JobSet's barrier
    # alone says when the ranks train together again, so the other rank's restart is seen in the note.
    held = policy(SAME)
    held = held.model_copy(update={"recovery": held.recovery.model_copy(update={"verify_progress": False})})
    outcome = await incident(temporal, queue, pods[0], held)
    _assert_held(sim, outcome, pods[0], whole=2)
    detect = notes(outcome, "detect")
    assert "restarts its other pods in place and recreates the failed pod alone" in detect, detect
    assert f"JobSet {name}: of its 1 other pods, 1 kept (1 restarted in place), 0 recreated" in notes(outcome), \
        notes(outcome)
    status = _get(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", name)["status"]
    assert status.get("restarts", 0) == 0 and status["currentInPlaceRestartAttempt"] == 1, status
    kept = _api_pod(api, pods[1]["name"])
    assert kept["metadata"]["uid"] == pods[1]["uid"] and kept["status"]["containerStatuses"][0]["restartCount"] >= 1


async def test_the_other_rank_leaves_the_freed_gpu_to_the_held_replacement(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str]) -> None:
    """One rank on each node; the failed rank's node keeps one spare GPU, the other node two. When the
    JobSet restarts, the other rank's new pod, left alone, may take that spare (the scheduler breaks ties
    toward node-0000) and leave the pinned replacement Pending. The hold names the JobSet, so the
    webhook keeps the other rank off the node by a preference, and it runs on the other node."""
    temporal, queue = worker
    name = f"js-{uuid.uuid4().hex[:5]}"
    blocker = block_node(sim, "node-0000", 2)
    pods = _start_jobset(sim, api, name)
    failed = next(p for p in pods if p["node"] == "node-0000")
    fellow = next(p for p in pods if p["node"] == "node-0001")
    delete_job(sim, blocker)
    block_node(sim, "node-0000", 1)
    fault(sim, failed, clears_on_restart=False)
    outcome = await incident(temporal, queue, failed, policy(SAME))
    _assert_held(sim, outcome, failed, whole=2)
    other = [p for p in sim.state()["pods"] if p.get("job") == fellow["job"] and not p["deleting"]]
    assert len(other) == 1 and other[0]["uid"] != fellow["uid"], other
    annotations = _api_pod(api, other[0]["name"])["metadata"].get("annotations") or {}
    assert annotations.get(KEPT_OFF_NODE) == "node-0000" and annotations.get(KEPT_OFF_BY) == outcome.incident_id, \
        annotations
    assert other[0]["node"] == "node-0001", other[0]


async def test_a_leaderworkerset_worker_comes_back_on_its_node_with_its_group(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str]) -> None:
    """LeaderWorkerSet (RecreateGroupOnPodRestart by default): evicting the worker recreates the group."""
    temporal, queue = worker
    name = f"lws-{uuid.uuid4().hex[:5]}"
    blocker = block_node(sim, "node-0000", 3)
    _create(api, "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": _template(sim, name, "Always")}}})
    leader, member = _pod(sim, f"{name}-0"), _pod(sim, f"{name}-0-1")
    _free(sim, blocker, [leader, member])
    fault(sim, member, clears_on_restart=False)
    outcome = await incident(temporal, queue, member, policy(SAME))
    replacement = _assert_held(sim, outcome, member, whole=2)
    assert replacement.name == f"{name}-0-1", "a StatefulSet's pod comes back under its name"
    assert _api_pod(api, f"{name}-0")["metadata"]["uid"] != leader["uid"], "the group was recreated"
    assert f"LeaderWorkerSet {name} running whole" in notes(outcome)


async def test_a_statefulset_pod_comes_back_on_its_node_under_its_name(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str]) -> None:
    temporal, queue = worker
    name = f"sts-{uuid.uuid4().hex[:5]}"
    blocker = block_node(sim, "node-0000", 3)
    template = _template(sim, name, "Always")
    template["metadata"]["labels"] = {**template["metadata"].get("labels", {}), "app": name}
    client.AppsV1Api(api).create_namespaced_stateful_set(NS, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"replicas": 2, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "template": template}})
    failed = _pod(sim, f"{name}-1")
    _free(sim, blocker, [_pod(sim, f"{name}-0"), failed])
    fault(sim, failed, clears_on_restart=False)
    outcome = await incident(temporal, queue, failed, policy(SAME))
    replacement = _assert_held(sim, outcome, failed, whole=2)
    assert replacement.name == f"{name}-1", "under its ordinal's name"
    assert f"StatefulSet {name} running whole" in notes(outcome)


async def test_with_the_webhook_down_the_incident_falls_back_to_a_preference_and_says_so(
        sim: SimCluster, api: client.ApiClient, admission: Any, worker: tuple[Client, str]) -> None:
    """Last in the module: it stops the webhook. failurePolicy Ignore lets every pod through unpinned
    (the simulated API server records the failed-open call); the dry-run probe shows it before the
    eviction, and the Job template's opt-in preference places the replacement."""
    temporal, queue = worker
    admission.terminate()
    admission.wait(timeout=10)
    name = f"train-{uuid.uuid4().hex[:5]}"
    blocker = block_node(sim, "node-0000", 3)
    sim.call(lambda: sim.engine.create_training_job(name, image=IMAGE))
    pod = ready_pod(sim, lambda p: p.get("job") == name, f"a Ready pod of {name}")
    _free(sim, blocker, [pod])
    fault(sim, pod, clears_on_restart=False)
    outcome = await incident(temporal, queue, pod, policy(SAME))
    recover = notes(outcome)
    assert outcome.recovered_by == "same_node", (outcome.outcome, recover)
    assert "same node not held: a dry-run pod came back without podmedic's pin" in recover, recover
    assert "falling back to a preference" in recover, recover
    assert sim.admission.log.failed_open, "the API server called the webhook and failed open"
    assert outcome.pod is not None and outcome.pod.node == pod["node"], "the preference placed it"
    assert PINNED_BY not in (_api_pod(api, outcome.pod.name)["metadata"].get("annotations") or {})

