"""Every pod goes through the API server's built-in admission, a controller's as much as a client's.

Sources: kubernetes/kubernetes ``plugin/pkg/admission/serviceaccount/admission.go`` (``default`` account,
a ``kube-api-access-*`` projected volume mounted at ``/var/run/secrets/kubernetes.io/serviceaccount``
unless the container mounts something there or automounting is off),
``plugin/pkg/admission/defaulttolerationseconds/admission.go`` (not-ready and unreachable NoExecute
tolerations for 300 s unless already tolerated) and ``plugin/pkg/admission/priority/admission.go``
(``preemptionPolicy: PreemptLowerPriority``). A replacement podmedic builds from a live pod meets
these fields on a cluster, so it meets them here.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.helpers import wait_until
from tests.sim.conftest import pod_manifest

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def _tolerations(pod: Any) -> dict[str, int | None]:
    return {t.key: t.toleration_seconds for t in pod.spec.tolerations or [] if t.effect == "NoExecute"}


def test_a_client_pod_gets_its_account_token_and_node_problem_tolerations(api: client.ApiClient, ns: str) -> None:
    pod = client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest("admitted"))
    assert pod.spec.service_account_name == "default" and pod.spec.preemption_policy == "PreemptLowerPriority"
    (volume,) = [v for v in pod.spec.volumes if v.name.startswith("kube-api-access-")]
    assert len(volume.name) == len("kube-api-access-") + 5 and volume.projected is not None
    assert [m.mount_path for m in pod.spec.containers[0].volume_mounts if m.name == volume.name] == [TOKEN_PATH]
    assert _tolerations(pod) == {"node.kubernetes.io/not-ready": 300, "node.kubernetes.io/unreachable": 300}


def test_what_a_pod_sets_itself_is_kept(api: client.ApiClient, ns: str) -> None:
    own: dict[str, Any] = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                           "tolerationSeconds": 30}
    pod = client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest(
        "own", tolerations=[own], automountServiceAccountToken=False))
    assert not [v for v in pod.spec.volumes or [] if v.name.startswith("kube-api-access-")]
    assert _tolerations(pod) == {"node.kubernetes.io/not-ready": 30, "node.kubernetes.io/unreachable": 300}


def test_a_job_controllers_pod_is_admitted_like_any_other(api: client.ApiClient, ns: str) -> None:
    manifest = pod_manifest("unused")
    template = {"spec": {**manifest["spec"], "restartPolicy": "Never"}}
    client.BatchV1Api(api).create_namespaced_job(ns, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "admitted-job"},
        "spec": {"template": template, "backoffLimit": 0}})
    pod = wait_until(lambda: next(iter(client.CoreV1Api(api).list_namespaced_pod(
        ns, label_selector="job-name=admitted-job").items), None), timeout=15, what="the Job controller's pod")
    assert pod.spec.service_account_name == "default" and pod.spec.termination_grace_period_seconds == 30
    assert any(v.name.startswith("kube-api-access-") for v in pod.spec.volumes)
    assert _tolerations(pod) == {"node.kubernetes.io/not-ready": 300, "node.kubernetes.io/unreachable": 300}
