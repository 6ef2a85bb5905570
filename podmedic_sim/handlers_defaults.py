"""Defaults and status resets the real API server applies when an object is created."""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic_sim.resources import ResourceType


def _container_defaults(ctr: Obj) -> None:
    image = str(ctr.get("image") or "")
    latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
    ctr.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    ctr.setdefault("terminationMessagePath", "/dev/termination-log")
    ctr.setdefault("terminationMessagePolicy", "File")
    ctr.setdefault("resources", {})


def pod_spec_defaults(spec: Obj, restart_policy: str = "Always") -> None:
    """Fill the PodSpec fields the API server defaults (those a reader may rely on)."""
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    for field in ("containers", "initContainers"):
        for ctr in spec.get(field) or []:
            if isinstance(ctr, dict):
                _container_defaults(ctr)


def apply_create_defaults(rt: ResourceType, obj: Obj) -> None:
    """Defaults of a new object; status starts empty where a controller owns it."""
    spec = obj.get("spec")
    if rt.kind == "Pod":
        if isinstance(spec, dict):
            pod_spec_defaults(spec)
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif rt.kind == "Job":
        template = (spec or {}).get("template") if isinstance(spec, dict) else None
        if isinstance(spec, dict):
            spec.setdefault("parallelism", 1)
            spec.setdefault("backoffLimit", 6)
            spec.setdefault("completionMode", "NonIndexed")
            spec.setdefault("suspend", False)
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            pod_spec_defaults(template["spec"], restart_policy="")
            if template["spec"]["restartPolicy"] == "":
                del template["spec"]["restartPolicy"]
        obj.pop("status", None)
    elif rt.kind == "Namespace":
        obj["status"] = {"phase": "Active"}
        labels = obj["metadata"].setdefault("labels", {})
        if isinstance(labels, dict):
            labels.setdefault("kubernetes.io/metadata.name", obj["metadata"].get("name"))
    elif "status" in rt.subresources and rt.kind != "Node":
        obj.pop("status", None)
