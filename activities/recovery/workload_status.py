"""Recovered means the workload says so: its own status, not only one pod's Ready.

A replacement can be Ready while its group is still restarting (a JobSet recreating every Job, a
LeaderWorkerSet recreating the group); training resumes only when all of it runs. Read from the
workload's status as its controller writes it:

- JobSet (kubernetes-sigs/jobset api/jobset/v1alpha2 ``JobSetStatus``): no ``Failed`` condition, and
  for every replicated Job ``replicatedJobsStatus[].ready + .succeeded`` reaches its ``replicas``.
- LeaderWorkerSet (kubernetes-sigs/lws api/leaderworkerset/v1 ``LeaderWorkerSetStatus``):
  ``readyReplicas`` (groups whose every pod is Ready) reaches ``spec.replicas``.
- StatefulSet (k8s.io/api apps/v1 ``StatefulSetStatus``): ``readyReplicas`` reaches ``spec.replicas``.

A plain Job's pod, a bare pod or an unknown owner: the pod's own verification is the whole answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from activities.recovery.verify import poll
from podmedic.domain.base import Obj
from podmedic.kube.gateway import KubeGateway

JOBSET = "jobset.sigs.k8s.io/jobset-name"
LWS = "leaderworkerset.sigs.k8s.io/name"


def _controller(pod: Obj) -> Obj | None:
    return next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def jobset_not_ready(js: Obj) -> str | None:
    """Why the JobSet is not running whole, or ``None``."""
    status = js.get("status") or {}
    conditions = status.get("conditions") or []
    failed = next((c for c in conditions if c.get("type") == "Failed" and c.get("status") == "True"), None)
    if failed is not None:
        return f"JobSet failed: {failed.get('reason')}: {failed.get('message', '')}"
    counts = {r.get("name"): r for r in status.get("replicatedJobsStatus") or []}
    for rjob in (js.get("spec") or {}).get("replicatedJobs") or []:
        have = counts.get(rjob.get("name")) or {}
        done = int(have.get("ready") or 0) + int(have.get("succeeded") or 0)
        if done < int(rjob.get("replicas", 1)):
            return f"replicated Job {rjob.get('name')}: {done} of {rjob.get('replicas', 1)} Jobs ready"
    return None


def replicas_not_ready(obj: Obj, what: str) -> str | None:
    """Why a StatefulSet or LeaderWorkerSet has fewer ready replicas than it wants, or ``None``."""
    want = int((obj.get("spec") or {}).get("replicas", 1))
    ready = int((obj.get("status") or {}).get("readyReplicas") or 0)
    return None if ready >= want else f"{ready} of {want} {what} ready"


def workload_not_ready(kube: KubeGateway, pod: Obj) -> tuple[str, str | None]:
    """The workload the pod belongs to (``""``: none to check) and why it is not ready (``None``: it is)."""
    meta = pod["metadata"]
    ns, labels = meta.get("namespace", "default"), meta.get("labels") or {}
    if JOBSET in labels:
        js = kube.get_owner("jobset.x-k8s.io/v1alpha2", "jobsets", ns, labels[JOBSET])
        return f"JobSet {labels[JOBSET]}", ("the JobSet is gone" if js is None else jobset_not_ready(js))
    if LWS in labels:
        lws = kube.get_owner("leaderworkerset.x-k8s.io/v1", "leaderworkersets", ns, labels[LWS])
        return f"LeaderWorkerSet {labels[LWS]}", ("it is gone" if lws is None else replicas_not_ready(lws, "groups"))
    owner = _controller(pod)
    if owner is not None and owner.get("kind") == "StatefulSet":
        sts = kube.get_owner("apps/v1", "statefulsets", ns, str(owner.get("name")))
        return f"StatefulSet {owner.get('name')}", ("it is gone" if sts is None else replicas_not_ready(sts, "pods"))
    return "", None


async def await_whole(run: Callable[..., Awaitable[Any]], kube: KubeGateway, pod: Obj, timeout_s: float,
                      poll_s: float) -> tuple[str, str | None]:
    """Poll the pod's workload until it runs whole; its name (``""``: none to check) and why it still does
    not after ``timeout_s`` (``None``: it does)."""
    last: list[tuple[str, str | None]] = []

    def whole() -> bool | None:
        last[:] = [workload_not_ready(kube, pod)]
        return True if last[0][1] is None else None

    await poll(run, whole, timeout_s, poll_s, "workload")
    return last[0] if last else ("", None)
