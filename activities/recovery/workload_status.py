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

A JobSet that restarts in place (``failurePolicy.restartStrategy: InPlaceRestart``, KEP-467) runs whole
only once its controller lifted the barrier: every live pod's ``jobset.sigs.k8s.io/in-place-restart-attempt``
equals ``status.currentInPlaceRestartAttempt`` (kubernetes-sigs/jobset ``pkg/controllers/
in_place_restart.go``). What became of the workload's other pods (kept, restarted in place, recreated) is
said from their uids and restart counts before and after (``others_line``).
"""

from __future__ import annotations

from activities.recovery.verify import poll
from podmedic.domain.base import Obj
from podmedic.domain.stall import pods_selector, workload_of
from podmedic.domain.workloads import IN_PLACE_RESTART_ATTEMPT, restarts_in_place
from podmedic.kube.loop_calls import LoopCalls

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


def barrier_not_lifted(js: Obj, pods: list[Obj]) -> str | None:
    """Why an in-place JobSet's workers still wait at the barrier (their pods at other attempts), or ``None``."""
    current = (js.get("status") or {}).get("currentInPlaceRestartAttempt")
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
            and not p["metadata"].get("deletionTimestamp")]
    behind = [p["metadata"]["name"] for p in live
              if (p["metadata"].get("annotations") or {}).get(IN_PLACE_RESTART_ATTEMPT) != str(current)]
    if current is None or behind:
        return (f"in-place restart: {len(live) - len(behind)} of {len(live)} pods at attempt {current} "
                f"(waiting: {', '.join(sorted(behind)[:5]) or 'none'})")
    return None


def restart_counts(pods: list[Obj]) -> dict[str, int]:
    """Each pod's containers' restarts, by pod uid."""
    return {p["metadata"]["uid"]: sum(int(s.get("restartCount") or 0)
                                      for s in (p.get("status") or {}).get("containerStatuses") or [])
            for p in pods}


def others_line(workload: str, before: dict[str, int], after: dict[str, int]) -> str:
    """What became of the workload's other pods: ``before``/``after`` are ``restart_counts``, the affected pod
    left out of ``before``."""
    kept = [uid for uid in before if uid in after]
    restarted = sum(1 for uid in kept if after[uid] > before[uid])
    return (f"{workload}: of its {len(before)} other pods, {len(kept)} kept ({restarted} restarted in place), "
            f"{len(before) - len(kept)} recreated")


async def workload_pods(api: LoopCalls, pod: Obj) -> list[Obj]:
    """The pods of the pod's workload by its controller's label (``podmedic/domain/stall.py``: a JobSet's, a
    LeaderWorkerSet group's, a Job's); ``[]`` for one known only by its owner."""
    found = workload_of(pod)
    selector = pods_selector(*found) if found else None
    if selector is None:
        return []
    return await api.list_pods(pod["metadata"].get("namespace", "default"), selector)


def replicas_not_ready(obj: Obj, what: str) -> str | None:
    """Why a StatefulSet or LeaderWorkerSet has fewer ready replicas than it wants, or ``None``."""
    want = int((obj.get("spec") or {}).get("replicas", 1))
    ready = int((obj.get("status") or {}).get("readyReplicas") or 0)
    return None if ready >= want else f"{ready} of {want} {what} ready"


async def workload_not_ready(api: LoopCalls, pod: Obj) -> tuple[str, str | None]:
    """The workload the pod belongs to (``""``: none to check) and why it is not ready (``None``: it is)."""
    meta = pod["metadata"]
    ns, labels = meta.get("namespace", "default"), meta.get("labels") or {}
    if JOBSET in labels:
        js = await api.get_owner("jobset.x-k8s.io/v1alpha2", "jobsets", ns, labels[JOBSET])
        if js is None:
            return f"JobSet {labels[JOBSET]}", "the JobSet is gone"
        why = jobset_not_ready(js)
        if why is None and restarts_in_place(js):
            why = barrier_not_lifted(js, await workload_pods(api, pod))
        return f"JobSet {labels[JOBSET]}", why
    if LWS in labels:
        lws = await api.get_owner("leaderworkerset.x-k8s.io/v1", "leaderworkersets", ns, labels[LWS])
        return f"LeaderWorkerSet {labels[LWS]}", ("it is gone" if lws is None else replicas_not_ready(lws, "groups"))
    owner = _controller(pod)
    if owner is not None and owner.get("kind") == "StatefulSet":
        sts = await api.get_owner("apps/v1", "statefulsets", ns, str(owner.get("name")))
        return f"StatefulSet {owner.get('name')}", ("it is gone" if sts is None else replicas_not_ready(sts, "pods"))
    return "", None


async def await_whole(api: LoopCalls, pod: Obj, timeout_s: float, poll_s: float) -> tuple[str, str | None]:
    """Poll the pod's workload until it runs whole; its name (``""``: none to check) and why it still does
    not after ``timeout_s`` (``None``: it does)."""
    last: list[tuple[str, str | None]] = []

    async def whole() -> bool | None:
        last[:] = [await workload_not_ready(api, pod)]
        return True if last[0][1] is None else None

    await poll(whole, timeout_s, poll_s, "workload")
    return last[0] if last else ("", None)
