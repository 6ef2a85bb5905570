"""Reading pods and claims as the API returns them (plain dicts); no I/O here."""

from __future__ import annotations

import datetime as dt

from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceRef, Health, PodRef
from podmedic.workload.protocol import CHECKPOINT_ID, PROGRESS, REPORTS_PROGRESS
from podmedic.workload.protocol import METHOD as CHECKPOINT_METHOD

INCIDENT = "podmedic.io/incident"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def claim_uses_device(claim: Obj, device: DeviceRef) -> bool:
    """Whether a ResourceClaim's allocation includes ``device``."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return any(
        r.get("driver") == device.driver and r.get("pool") == device.pool and r.get("device") == device.device
        for r in results
    )


def pods_of_claim(claim: Obj) -> list[tuple[str, str, str]]:
    """``(namespace, name, uid)`` of the pods a claim is reserved for."""
    ns = claim["metadata"].get("namespace", "")
    return [
        (ns, r["name"], r.get("uid", ""))
        for r in (claim.get("status") or {}).get("reservedFor") or []
        if r.get("resource", "pods") == "pods" and r.get("name")
    ]


def annotations_of(pod: Obj) -> dict[str, str]:
    """A pod's annotations (never ``None``)."""
    return pod["metadata"].get("annotations") or {}


def reports_progress(pod: Obj) -> bool:
    """Whether the pod declares the progress protocol (``podmedic.io/reports-progress: "true"``)."""
    return annotations_of(pod).get(REPORTS_PROGRESS, "").lower() == "true"


def restart_count(pod: Obj) -> int:
    """Restarts of all containers together."""
    return sum(int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])


def containers_running(pod: Obj) -> bool:
    """The pod runs and every container of it is in state ``running`` (none crashed or waiting)."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return (status.get("phase") == "Running" and bool(statuses)
            and all("running" in (c.get("state") or {}) for c in statuses))


def step_of(pod: Obj) -> str | None:
    """The step a running pod reports (``podmedic.io/progress``), or ``None`` when it declares no progress
    protocol, shows no step, is being deleted or has a container not running (a crash loop is no step)."""
    if not reports_progress(pod) or "deletionTimestamp" in pod["metadata"] or not containers_running(pod):
        return None
    return annotations_of(pod).get(PROGRESS)


def terminated(pod: Obj) -> str | None:
    """Why the pod will run no more, if it will not: its phase is terminal (``Failed``, ``Succeeded``:
    a pod never leaves them, k8s.io/api core/v1 PodPhase) or it is being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Failed", "Succeeded"):
        return f"phase {phase}"
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return "being deleted"
    return None


def api_time(stamp: object) -> dt.datetime | None:
    """A time of the API (meta/v1 ``Time``: RFC 3339, ``2026-11-28T10:00:00Z``), aware; one without
    an offset is taken as UTC (the API's own zone); None when absent or not a time."""
    try:
        when = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else None
    except ValueError:
        return None
    return when if when is None or when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def started_at(pod: Obj) -> dt.datetime | None:
    """When the kubelet took the pod on (``status.startTime``)."""
    return api_time((pod.get("status") or {}).get("startTime"))


def ended_at(pod: Obj) -> dt.datetime | None:
    """When the pod's last container ended (the latest ``state.terminated.finishedAt``)."""
    ends = [when for c in (pod.get("status") or {}).get("containerStatuses") or []
            if (when := api_time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt")))]
    return max(ends, default=None)


def is_ready(pod: Obj) -> bool:
    """Pod condition Ready is True and the pod is not being deleted."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def job_name(pod: Obj) -> str | None:
    """The Job owning a pod, if any."""
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("controller"):
            return str(owner["name"])
    labels = pod["metadata"].get("labels") or {}
    return labels.get("batch.kubernetes.io/job-name")


def device_statuses(pod: Obj) -> dict[str, tuple[Health, str]]:
    """KEP-4680: every device the pod's containers report, as resourceID → (health, message)."""
    found: dict[str, tuple[Health, str]] = {}
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for entry in status.get("allocatedResourcesStatus") or []:
            for res in entry.get("resources") or []:
                rid = res.get("resourceID")
                if not rid:
                    continue
                try:
                    health = Health(res.get("health") or "Unknown")
                except ValueError:
                    health = Health.UNKNOWN
                found[rid] = (health, res.get("message") or "")
    return found


def devices_healthy(pod: Obj) -> bool:
    """Every device the pod reports is Healthy (and it reports at least one)."""
    statuses = device_statuses(pod)
    return bool(statuses) and all(h is Health.HEALTHY for h, _ in statuses.values())


def pod_ref(pod: Obj) -> PodRef:
    """The fields of a pod the incident keeps."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    notes = annotations_of(pod)
    return PodRef(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        created=meta.get("creationTimestamp", ""),
        phase=(pod.get("status") or {}).get("phase", ""),
        node=spec.get("nodeName"),
        job=job_name(pod),
        restart_count=restart_count(pod),
        containers=[c["name"] for c in spec.get("containers") or []],
        running=containers_running(pod),
        checkpoint_method=notes.get(CHECKPOINT_METHOD),
        last_checkpoint_id=notes.get(CHECKPOINT_ID),
    )
