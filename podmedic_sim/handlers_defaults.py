"""Defaults and status resets the real API server applies when an object is created."""

from __future__ import annotations

import base64

from podmedic.domain.base import Obj
from podmedic_sim.resources import ResourceType
from podmedic_sim.store import now_rfc3339


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
    default_device_taint_times(rt, obj)
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
    elif rt.kind == "Secret":
        secret_defaults(obj)
    elif "status" in rt.subresources and rt.kind != "Node":
        obj.pop("status", None)


def secret_defaults(obj: Obj) -> None:
    """What every write of a Secret gets, a create or an update: ``type`` Opaque when unset
    (pkg/apis/core/v1/defaults.go SetDefaults_Secret), and ``stringData`` merged into ``data``, winning
    over it, and dropped (pkg/apis/core/v1/conversion.go Convert_v1_Secret_To_core_Secret): the API never
    returns ``stringData``."""
    obj.setdefault("type", "Opaque")
    strings = obj.pop("stringData", None)
    if isinstance(strings, dict) and strings:
        data = obj.setdefault("data", {})
        if isinstance(data, dict):
            data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in strings.items()})


def default_device_taint_times(rt: ResourceType, obj: Obj) -> None:
    """A device taint without ``timeAdded`` gets the time it is written, in whole seconds
    (``SetDefaults_DeviceTaint``, pkg/apis/resource/v1/defaults.go): a DeviceTaintRule's taint and a
    ResourceSlice's device taints, on create and on update alike (defaults apply to every decoded body)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    taints: list[object] = []
    if rt.kind == "DeviceTaintRule":
        taints.append(spec.get("taint"))
    elif rt.kind == "ResourceSlice":
        for device in spec.get("devices") or []:
            if isinstance(device, dict):
                taints.extend(device.get("taints") or [])
    for taint in taints:
        if isinstance(taint, dict) and not taint.get("timeAdded"):
            taint["timeAdded"] = now_rfc3339()


def device_taint_rule_update(old: Obj, new: Obj) -> None:
    """A DeviceTaintRule whose effect changes while its ``timeAdded`` is left as it was gets the time of
    the change (pkg/registry/resource/devicetaintrule/strategy.go ``PrepareForUpdate``: ``timeAdded``
    tracks when the *effect* was added, which is what tolerationSeconds count from)."""
    old_taint = (old.get("spec") or {}).get("taint") or {}
    taint = (new.get("spec") or {}).get("taint")
    if (isinstance(taint, dict) and taint.get("effect") != old_taint.get("effect")
            and taint.get("timeAdded") == old_taint.get("timeAdded")):
        taint["timeAdded"] = now_rfc3339()
