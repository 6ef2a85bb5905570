"""The simulator's StatefulSet, JobSet and LeaderWorkerSet controllers behave as upstream's.

Expected shapes and rules from the upstream sources, not from the simulator:
- StatefulSet: kubernetes/kubernetes pkg/controller/statefulset (pod ``<set>-<ordinal>``, labels
  ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``, ``spec.ordinals.start``,
  a deleted pod recreated under its name).
- JobSet: kubernetes-sigs/jobset pkg/controllers (``GenJobName`` ``<js>-<rjob>-<index>``,
  ``labelAndAnnotateObject``; ``executeFailurePolicy``: no failurePolicy fails the JobSet with
  reason ``FailedJobs``; the default rule action ``RestartJobSet`` bumps ``status.restarts`` and
  recreates the Jobs with ``restart-attempt`` = restarts; ``ReachedMaxRestarts`` past ``maxRestarts``).
- LeaderWorkerSet: kubernetes-sigs/lws pkg/controllers/pod_controller.go (worker StatefulSet named
  after the leader pod, owned by it, ordinals from 1; ``RecreateGroupOnPodRestart`` deletes the
  leader when a pod of the group is deleted).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from podmedic_sim import SimCluster
from tests.helpers import wait_until

NS = "default"
SPEC = {"containers": [{"name": "c", "image": "registry.local/x:1"}]}


@pytest.fixture
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    if getattr(sim.engine, "statefulsets", None) is None:
        pytest.skip("the API-only simulator runs no controllers")
    api = config.new_client_from_config(str(sim.kubeconfig_path))
    yield api
    api.close()


def _pods(api: client.ApiClient, selector: str) -> dict[str, Any]:
    return {p.metadata.name: p for p in client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=selector).items}


def _custom(api: client.ApiClient, group: str, version: str, plural: str, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, NS, plural, body)


def _get(api: client.ApiClient, group: str, version: str, plural: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(group, version, NS, plural, name)
    return found


def test_a_statefulset_keeps_each_ordinal_under_its_name(api: client.ApiClient) -> None:
    name = f"s-{uuid.uuid4().hex[:5]}"
    client.AppsV1Api(api).create_namespaced_stateful_set(NS, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"replicas": 2, "serviceName": name, "ordinals": {"start": 3}, "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": SPEC}}})
    pods = wait_until(lambda: ((p := _pods(api, f"app={name}")) and len(p) == 2 and p) or None, timeout=10,
                      what="two pods")
    assert sorted(pods) == [f"{name}-3", f"{name}-4"]
    first = pods[f"{name}-3"]
    assert first.metadata.labels["statefulset.kubernetes.io/pod-name"] == f"{name}-3"
    assert first.metadata.labels["apps.kubernetes.io/pod-index"] == "3"
    assert (first.spec.hostname, first.spec.subdomain) == (f"{name}-3", name)
    client.CoreV1Api(api).delete_namespaced_pod(f"{name}-3", NS, grace_period_seconds=0)
    again = wait_until(lambda: ((p := _pods(api, f"app={name}").get(f"{name}-3")) and
                       p.metadata.uid != first.metadata.uid and p) or None, timeout=10, what="the ordinal back")
    assert again.metadata.name == f"{name}-3"
    client.AppsV1Api(api).delete_namespaced_stateful_set(name, NS)


def _jobset(name: str, policy: dict[str, Any] | None) -> dict[str, Any]:
    job = {"spec": {"parallelism": 1, "backoffLimit": 0, "template": {"spec": {**SPEC, "restartPolicy": "Never"}}}}
    spec: dict[str, Any] = {"replicatedJobs": [{"name": "w", "replicas": 2, "template": job}]}
    if policy is not None:
        spec["failurePolicy"] = policy
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name}, "spec": spec}


def _fail_a_pod(api: client.ApiClient, sim: SimCluster, name: str) -> None:
    """A pod of Job ``<name>-w-0`` is deleted before it finishes: its Job (backoffLimit 0) fails."""
    pods = wait_until(lambda: _pods(api, f"batch.kubernetes.io/job-name={name}-w-0") or None, timeout=10,
                      what="a pod of the first Job")
    client.CoreV1Api(api).delete_namespaced_pod(next(iter(pods)), NS, grace_period_seconds=0)


def _condition(js: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (js.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


def test_a_jobset_without_failure_policy_fails_when_a_job_fails(api: client.ApiClient, sim: SimCluster) -> None:
    name = f"j-{uuid.uuid4().hex[:5]}"
    _custom(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", _jobset(name, None))
    jobs = wait_until(lambda: (len(b := client.BatchV1Api(api).list_namespaced_job(
        NS, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items) == 2 and b) or None, timeout=10,
        what="two Jobs")
    assert sorted(j.metadata.name for j in jobs) == [f"{name}-w-0", f"{name}-w-1"]
    labels = jobs[0].spec.template.metadata.labels
    assert {"jobset.sigs.k8s.io/replicatedjob-name", "jobset.sigs.k8s.io/job-index",
            "jobset.sigs.k8s.io/restart-attempt"} <= set(labels)
    _fail_a_pod(api, sim, name)
    failed = wait_until(lambda: _condition(_get(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", name), "Failed"),
                        timeout=10, what="the JobSet failed")
    assert failed["reason"] == "FailedJobs"
    # A finished JobSet deletes its active Jobs (jobset_controller.go Reconcile, jobSetFinished): the other
    # rank does not go on alone; the failed Job stays, as upstream keeps it.
    wait_until(lambda: [j.metadata.name for j in client.BatchV1Api(api).list_namespaced_job(
        NS, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items] == [f"{name}-w-0"] or None,
        timeout=10, what="the active Job deleted, the failed one kept")


def test_a_jobset_with_failure_policy_restarts_every_job_until_max_restarts(
        api: client.ApiClient, sim: SimCluster) -> None:
    name = f"r-{uuid.uuid4().hex[:5]}"
    _custom(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", _jobset(name, {"maxRestarts": 1}))
    wait_until(lambda: len(_pods(api, f"jobset.sigs.k8s.io/jobset-name={name}")) == 2 or None, timeout=10,
               what="two pods")
    before = set(_pods(api, f"jobset.sigs.k8s.io/jobset-name={name}"))
    _fail_a_pod(api, sim, name)

    def restarted() -> dict[str, Any] | None:
        pods = {n: p for n, p in _pods(api, f"jobset.sigs.k8s.io/jobset-name={name}").items()
                if p.metadata.labels.get("jobset.sigs.k8s.io/restart-attempt") == "1"}
        return pods if len(pods) == 2 else None

    pods = wait_until(restarted, timeout=10, what="every Job made again, restart-attempt 1")
    assert not set(pods) & before, "the other Job's pod was recreated too"
    assert _get(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", name)["status"]["restarts"] == 1
    _fail_a_pod(api, sim, name)
    failed = wait_until(lambda: _condition(_get(api, "jobset.x-k8s.io", "v1alpha2", "jobsets", name), "Failed"),
                        timeout=10, what="the JobSet failed at maxRestarts")
    assert failed["reason"] == "ReachedMaxRestarts"


def test_a_leaderworkerset_recreates_the_group_of_a_deleted_worker(api: client.ApiClient) -> None:
    name = f"l-{uuid.uuid4().hex[:5]}"
    _custom(api, "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": SPEC}}}})
    selector = f"leaderworkerset.sigs.k8s.io/name={name}"
    pods = wait_until(lambda: (len(p := _pods(api, selector)) == 6 and p) or None, timeout=15, what="two groups of 3")
    assert sorted(pods) == sorted(f"{name}-{g}{w}" for g in (0, 1) for w in ("", "-1", "-2"))
    worker = pods[f"{name}-1-2"]
    assert (worker.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"],
            worker.metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"]) == ("1", "2")
    owner = client.AppsV1Api(api).read_namespaced_stateful_set(f"{name}-1", NS).metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid) == ("Pod", f"{name}-1", pods[f"{name}-1"].metadata.uid)
    client.CoreV1Api(api).delete_namespaced_pod(f"{name}-1-2", NS, grace_period_seconds=0)

    group = [f"{name}-1", f"{name}-1-1", f"{name}-1-2"]

    def recreated() -> dict[str, Any] | None:
        now = _pods(api, selector)
        fresh = all(n in now and now[n].metadata.uid != pods[n].metadata.uid for n in group)
        return now if fresh else None

    now = wait_until(recreated, timeout=15, what="every pod of group 1 made again")
    assert all(now[n].metadata.uid == pods[n].metadata.uid for n in (f"{name}-0", f"{name}-0-1", f"{name}-0-2")), \
        "group 0 untouched"
