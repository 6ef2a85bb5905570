"""Builder of training Jobs: the ResourceClaimTemplate and batch/v1 Job of the contract."""

from __future__ import annotations

from typing import Any

from podmedic.sim.store import Obj, Store
from podmedic.sim.workload import CKPT_METHOD, RESTART_EXIT_CODE, TRAINING
from podmedic.sim.workload_http import CKPT_ANSWER


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
) -> Obj:
    """Create ``<name>-gpu`` (ResourceClaimTemplate) and the Job ``<name>``; returns the Job."""
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
    annotations = {TRAINING: "true", RESTART_EXIT_CODE: str(restart_exit_code)}
    if checkpoint_method:
        annotations[CKPT_METHOD] = checkpoint_method
    if checkpoint_answer:
        annotations[CKPT_ANSWER] = checkpoint_answer
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
                        "action": "Restart",
                        "exitCodes": {"operator": "In", "values": [restart_exit_code]},
                    }
                ],
            }
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
    }
    if node_name:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node_name]}
                            ]
                        }
                    ]
                }
            }
        }
    return store.create(
        "jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {
                "parallelism": parallelism,
                "backoffLimit": backoff_limit,
                "template": {
                    "metadata": {"labels": {"app": name}, "annotations": annotations},
                    "spec": pod_spec,
                },
            },
        },
    )
