"""The workload above an affected pod, found by walking ownerReferences on the simulator over HTTP.

The simulator's controllers make the objects as the real ones do (podmedic_sim/jobsets.py,
leaderworkersets.py and statefulsets.py cite their upstream sources; podmedic/domain/workloads.py
what podmedic reads from each): a TrainJob's JobSet (kubeflow/trainer names it after the TrainJob)
makes Jobs whose pods carry ``jobset.sigs.k8s.io/jobset-name``; a LeaderWorkerSet makes its leader
StatefulSet, each leader pod owns its group's worker StatefulSet (kubernetes-sigs/lws
pkg/controllers/pod_controller.go), and every pod carries ``leaderworkerset.sigs.k8s.io/name`` and
``.../group-index``; a StatefulSet's pods match its selector. The PyTorchJob's pod and the unknown
owner's are made by the test (no such controller runs). Each incident runs on the real worker (so
the RBAC proof sees its reads), in dry run where only the discovery is the point: the timeline says
what it found.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from temporalio.client import Client

from podmedic.domain.models import Outcome
from podmedic_sim import SimCluster
from tests.e2e_recover.conftest import DRIVER, IMAGE, fault, incident, notes, policy, ready_pod
from tests.e2e_recover.test_in_place import IN_PLACE_ONLY
from tests.helpers import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")
NS = "default"
DRY_RUN = policy(IN_PLACE_ONLY).model_copy(update={"dry_run": True})


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    assert sim.kubeconfig_path is not None
    yield config.new_client_from_config(str(sim.kubeconfig_path))


def _create(api: client.ApiClient, api_version: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    group, _, version = api_version.rpartition("/")
    body = {"apiVersion": api_version, **body}
    if not group:
        return client.CoreV1Api(api).api_client.sanitize_for_serialization(
            client.CoreV1Api(api).create_namespaced_pod(NS, body))  # type: ignore[no-any-return]
    created: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, NS, plural, body)
    return created


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _template(api: client.ApiClient, name: str) -> str:
    _create(api, "resource.k8s.io/v1", "resourceclaimtemplates", {
        "kind": "ResourceClaimTemplate", "metadata": {"name": f"{name}-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}}})
    return f"{name}-gpu"


def _pod_spec(template: str) -> dict[str, Any]:
    return {"restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "trainer", "image": IMAGE, "command": ["python", "train.py"],
                            "resources": {"claims": [{"name": "gpu"}]}}]}


def _pod(api: client.ApiClient, name: str, template: str, owner: dict[str, Any] | None,
         labels: dict[str, str]) -> dict[str, Any]:
    return _create(api, "v1", "pods", {
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [_owner(owner)] if owner else []},
        "spec": _pod_spec(template)})


def _pod_of_job(sim: SimCluster, job: str) -> str:
    def first() -> str | None:
        return next((p["name"] for p in sim.state()["pods"] if p.get("job") == job and p["devices"]), None)
    return wait_until(first, timeout=30, what=f"a pod of {job} with a device")


def _sim_pod(sim: SimCluster, name: str) -> dict[str, Any]:
    def held() -> dict[str, Any] | None:
        return next((p for p in sim.state()["pods"] if p["name"] == name and p["devices"]), None)
    return wait_until(held, timeout=30, what=f"a device for {name}")


async def _found(sim: SimCluster, worker: tuple[Client, str], name: str) -> str:
    """The detect lines of a dry-run incident on the device of pod ``name``: what discovery found."""
    temporal, queue = worker
    outcome = await incident(temporal, queue, _sim_pod(sim, name), DRY_RUN)
    assert outcome.outcome is Outcome.DRY_RUN, notes(outcome)
    return notes(outcome, "detect")


def _clean_up(api: client.ApiClient, prefix: str) -> None:
    """Free the devices for the next test: the workloads first (their controllers would replace what
    they own), then Jobs and pods."""
    custom = client.CustomObjectsApi(api)
    for group, version, plural in (("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
                                   ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
                                   ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
                                   ("apps", "v1", "statefulsets"), ("kubeflow.org", "v1", "pytorchjobs")):
        for obj in custom.list_namespaced_custom_object(group, version, NS, plural)["items"]:
            if obj["metadata"]["name"].startswith(prefix) or prefix in obj["metadata"]["name"]:
                custom.delete_namespaced_custom_object(group, version, NS, plural, obj["metadata"]["name"])
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    for job in batch.list_namespaced_job(NS).items:
        if job.metadata.name.startswith(prefix):
            batch.delete_namespaced_job(job.metadata.name, NS, propagation_policy="Background")
    for pod in core.list_namespaced_pod(NS).items:
        if prefix in pod.metadata.name:
            try:
                core.delete_namespaced_pod(pod.metadata.name, NS, grace_period_seconds=0)
            except ApiException as err:  # its Job's deletion took it first (garbage collection): as kubectl's
                if err.status != 404:  # --ignore-not-found
                    raise


def _jobset(name: str, replicas: int, pod_template: dict[str, Any], owner: dict[str, Any] | None = None,
            failure_policy: dict[str, Any] | None = None, backoff_limit: int = 6) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicatedJobs": [{"name": "node", "replicas": replicas, "template": {
        "spec": {"parallelism": 1, "backoffLimit": backoff_limit, "template": pod_template}}}]}
    if failure_policy is not None:
        spec["failurePolicy"] = failure_policy
    return {"kind": "JobSet", "metadata": {"name": name, "ownerReferences": [_owner(owner)] if owner else []},
            "spec": spec}


async def test_a_trainjob_pod_belongs_to_the_whole_jobset(sim: SimCluster, api: client.ApiClient,
                                                          worker: tuple[Client, str]) -> None:
    name = f"tj-{uuid.uuid4().hex[:5]}"
    pod_template = {"spec": _pod_spec(_template(api, name))}
    trainjob = _create(api, "trainer.kubeflow.org/v1alpha1", "trainjobs", {
        "kind": "TrainJob", "metadata": {"name": name}, "spec": {"runtimeRef": {"name": "torch-distributed"}}})
    _create(api, "jobset.x-k8s.io/v1alpha2", "jobsets", _jobset(name, 2, pod_template, trainjob, {"maxRestarts": 3}))
    first, second = (_pod_of_job(sim, f"{name}-node-{index}") for index in range(2))
    found = await _found(sim, worker, first)
    assert f"workload: TrainJob {NS}/{name} (via Job {name}-node-0 > JobSet {name} > TrainJob {name})" in found, found
    assert "one failed pod restarts its group" in found, "the trainer's JobSet restarts every Job"
    assert f"other live pods: {NS}/{second}\n" in found + "\n", found

    # A JobSet without failurePolicy fails as a whole when one Job fails (upstream executeFailurePolicy).
    _create(api, "jobset.x-k8s.io/v1alpha2", "jobsets", _jobset(f"{name}-np", 1, pod_template))
    found = await _found(sim, worker, _pod_of_job(sim, f"{name}-np-node-0"))
    assert "marks the whole JobSet Failed when one Job fails (no failurePolicy)" in found, found
    _clean_up(api, name)


async def test_a_leaderworkerset_worker_belongs_to_its_group(sim: SimCluster, api: client.ApiClient,
                                                             worker: tuple[Client, str]) -> None:
    name = f"lws-{uuid.uuid4().hex[:5]}"
    spec = {**_pod_spec(_template(api, name)), "restartPolicy": "Always"}
    _create(api, "leaderworkerset.x-k8s.io/v1", "leaderworkersets", {
        "kind": "LeaderWorkerSet", "metadata": {"name": name},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": spec}}}})
    found = await _found(sim, worker, f"{name}-1-1")
    way = f"StatefulSet {name}-1 > Pod {name}-1 > StatefulSet {name} > LeaderWorkerSet {name}"
    assert f"workload: LeaderWorkerSet {NS}/{name} (via {way})" in found, found
    assert "restartPolicy RecreateGroupOnPodRestart" in found, "the default restarts the group"
    assert f"other live pods: {NS}/{name}-1\n" in found + "\n", "its group's leader, not the other group"
    _clean_up(api, name)


async def test_a_statefulset_pod_a_pytorchjob_pod_and_an_unknown_owner(sim: SimCluster, api: client.ApiClient,
                                                                       worker: tuple[Client, str]) -> None:
    name = f"sts-{uuid.uuid4().hex[:5]}"
    template = _template(api, name)
    _create(api, "apps/v1", "statefulsets", {
        "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"replicas": 2, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {**_pod_spec(template), "restartPolicy": "Always"}}}})
    _sim_pod(sim, f"{name}-0")
    found = await _found(sim, worker, f"{name}-1")
    assert f"workload: StatefulSet {NS}/{name} (via StatefulSet {name}); its controller recreates the failed pod " \
           f"under the same name (its ordinal); other live pods: {NS}/{name}-0" in found, found

    pytorch = _create(api, "kubeflow.org/v1", "pytorchjobs", {
        "kind": "PyTorchJob", "metadata": {"name": f"pt-{name}"}, "spec": {"pytorchReplicaSpecs": {}}})
    _pod(api, f"pt-{name}-worker-0", template, pytorch, {"training.kubeflow.org/job-name": f"pt-{name}"})
    found = await _found(sim, worker, f"pt-{name}-worker-0")
    assert f"workload: PyTorchJob {NS}/pt-{name} (via PyTorchJob pt-{name})" in found, found

    unknown = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "uid": "u-1"}}
    _pod(api, f"odd-{name}", template, unknown, {})
    found = await _found(sim, worker, f"odd-{name}")
    assert "workload: none podmedic knows; owned by Trainer t (example.com/v1), a kind podmedic does not know: " \
           "handled as a bare pod" in found, found
    _clean_up(api, name)


async def test_a_jobset_pod_incident_checkpoints_the_whole_jobset_first(
        sim: SimCluster, api: client.ApiClient, worker: tuple[Client, str]) -> None:
    """End to end with the real worker: the device of one pod of a two-Job JobSet fails; the incident names
    the JobSet, asks both pods to save before it acts, and restarts the pod in place."""
    temporal, queue = worker
    name = f"js-{uuid.uuid4().hex[:5]}"
    # A training Job of no pods lends its pod template (claims, trainer, checkpoint annotation) to the JobSet's.
    proto = sim.call(lambda: sim.engine.create_training_job(f"{name}-proto", parallelism=0, image=IMAGE))
    _create(api, "jobset.x-k8s.io/v1alpha2", "jobsets",
            _jobset(name, 2, proto["spec"]["template"], failure_policy={"maxRestarts": 3}, backoff_limit=100))
    pods = [ready_pod(sim, lambda p, j=f"{name}-node-{i}": p.get("job") == j, "a Ready JobSet pod") for i in range(2)]
    fault(sim, pods[0])
    outcome = await incident(temporal, queue, pods[0], policy(IN_PLACE_ONLY))
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, notes(outcome)
    detect = notes(outcome, "detect")
    assert f"workload: JobSet {NS}/{name} (via Job {name}-node-0 > JobSet {name})" in detect, detect
    assert "one failed pod restarts its group" in detect and f"other live pods: {NS}/{pods[1]['name']}" in detect
    assert outcome.checkpoint.startswith("complete: 2/2"), (outcome.checkpoint, notes(outcome, "checkpoint"))
    assert len(outcome.checkpoint_ids) == 2, outcome.checkpoint_ids
    order = [e.step for e in outcome.timeline]
    assert order.index("checkpoint") < order.index("recover")
    _clean_up(api, name)
