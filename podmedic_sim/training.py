"""Builder of training Jobs: the ResourceClaimTemplate and batch/v1 Job of the contract."""

from __future__ import annotations

from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.collectives import COLLECTIVE_TIMEOUT_S, HANG_DETECT_S, IN_JOB_RESTART_S, IN_JOB_RESTARTS, PEER_EXIT_S
from podmedic_sim.store import Store, json_copy
from podmedic_sim.workload_protocol import (
    CKPT_ANSWER,
    CKPT_METHOD,
    REPORTS_PROGRESS,
    RESTART_EXIT_CODE,
    SIGTERM_CHECKPOINT,
    TRAINING,
)

PREFER_LABEL_PREFIX = "prefer.podmedic.io/"
COLLECTIVE_ANNOTATIONS = {"peer_exit_s": PEER_EXIT_S, "collective_timeout_s": COLLECTIVE_TIMEOUT_S,
                          "in_job_restarts": IN_JOB_RESTARTS, "in_job_restart_s": IN_JOB_RESTART_S,
                          "hang_detect_s": HANG_DETECT_S}


def in_place_jobset(job: Obj, failure_policy: Obj) -> tuple[Obj, Obj]:
    """The child Job template and ``failurePolicy`` of a JobSet that restarts in place, from those of one
    that recreates its Jobs, as jobset's example manifest has them
    (``site/static/examples/in-place-restart/jobset-main-container-mode.yaml``): ``restartStrategy:
    InPlaceRestart``, ``backoffLimit`` MaxInt32 with ``podReplacementPolicy: Failed`` (a failed pod is
    recreated alone), the first container restarted in place on any non-zero exit."""
    job = json_copy(job)
    job["spec"].update(completions=job["spec"].get("parallelism", 1), backoffLimit=2147483647,
                       podReplacementPolicy="Failed")
    job["spec"]["template"]["spec"]["containers"][0]["restartPolicyRules"] = [
        {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}}]
    return job, {**failure_policy, "restartStrategy": "InPlaceRestart"}


def create_training_job(
    store: Store,
    name: str,
    namespace: str = "default",
    parallelism: int = 1,
    devices_per_pod: int = 1,
    driver: str = "gpu.nvidia.com",
    image: str = "registry.local/trainer:1",
    checkpoint_method: str | None = "annotation",
    restart_exit_code: int = 85,
    node_name: str | None = None,
    backoff_limit: int = 100,
    checkpoint_answer: str | None = None,
    *,
    restart_action: str = "Restart",
    extra_restart_codes: list[int] | None = None,
    sidecar: bool = False,
    prefer_node_label: bool = True,
    checkpoint_on_sigterm: bool = False,
    jobset: bool = False,
    in_place_restart: bool = False,
    collectives: dict[str, float] | None = None,
) -> Obj:
    """Create ``<name>-gpu`` (ResourceClaimTemplate) and the Job ``<name>``; returns the Job.

    ``restart_action`` is the action of the trainer's restart rule (``Restart``, KEP-5307, or
    ``RestartAllContainers``, KEP-5532) for ``restart_exit_code`` and ``extra_restart_codes``
    (e.g. 143, a SIGTERM sent by pods/exec); ``sidecar`` adds a second container (``logger``);
    ``prefer_node_label`` adds the preferred node affinity on ``prefer.podmedic.io/<name>``
    that podmedic's same-node reschedule sets on the node (docs/recovery-restart.md);
    ``checkpoint_on_sigterm`` makes the trainer save when it is sent SIGTERM (a graceful deletion
    or a signal) if the grace period covers ``checkpoint_save_s``. ``jobset`` makes a JobSet
    ``<name>`` of ``parallelism`` one-pod Jobs instead (``backoffLimit`` 0, failurePolicy
    ``maxRestarts`` ``backoff_limit``: a failed pod restarts the whole JobSet), training as one job;
    with ``in_place_restart`` the JobSet restarts in place instead (KEP-467: ``in_place_jobset``,
    ``podmedic_sim/in_place_restart.py``).
    ``collectives`` declares how the ranks fail together (``podmedic_sim/collectives.py``: ``peer_exit_s``,
    ``collective_timeout_s``, ``in_job_restarts``, ``in_job_restart_s``, ``hang_detect_s``); none: each rank
    waits for the others.
    """
    template_name = f"{name}-gpu"
    store.create(
        "resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": template_name, "namespace": namespace},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": driver,
                                    "allocationMode": "ExactCount",
                                    "count": devices_per_pod,
                                },
                            }
                        ]
                    }
                }
            },
        },
    )
    annotations = {TRAINING: "true", RESTART_EXIT_CODE: str(restart_exit_code), REPORTS_PROGRESS: "true"}
    if checkpoint_method:
        annotations[CKPT_METHOD] = checkpoint_method
    if checkpoint_answer:
        annotations[CKPT_ANSWER] = checkpoint_answer
    if checkpoint_on_sigterm:
        annotations[SIGTERM_CHECKPOINT] = "true"
    for key, value in (collectives or {}).items():
        annotations[COLLECTIVE_ANNOTATIONS[key]] = f"{value:g}"
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "trainer",
                "image": image,
                "command": ["python", "train.py"],
                "resources": {"claims": [{"name": "gpu"}]},
                "restartPolicy": "Never",
                "restartPolicyRules": [
                    {
                        "action": restart_action,
                        "exitCodes": {
                            "operator": "In",
                            "values": [restart_exit_code, *(extra_restart_codes or [])],
                        },
                    }
                ],
            }
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
    }
    if sidecar:
        pod_spec["containers"].append(
            {"name": "logger", "image": image, "command": ["python", "log_shipper.py"], "restartPolicy": "Never"}
        )
    if prefer_node_label:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {"matchExpressions": [{"key": PREFER_LABEL_PREFIX + name, "operator": "Exists"}]},
                    }
                ]
            }
        }
    if node_name:
        pinned = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        node_affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [pinned]}
    template = {"metadata": {"labels": {"app": name}, "annotations": annotations}, "spec": pod_spec}
    if jobset:
        job: Obj = {"spec": {"parallelism": 1, "backoffLimit": 0, "template": template}}
        failure_policy: Obj = {"maxRestarts": backoff_limit}
        if in_place_restart:
            job, failure_policy = in_place_jobset(job, failure_policy)
        return store.create("jobsets", {
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {"failurePolicy": failure_policy,
                     "replicatedJobs": [{"name": "node", "replicas": parallelism, "template": job}]}})
    return store.create(
        "jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {"parallelism": parallelism, "backoffLimit": backoff_limit, "template": template},
        },
    )
