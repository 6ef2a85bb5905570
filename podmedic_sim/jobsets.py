"""The JobSet controller (``jobset.x-k8s.io/v1alpha2``): child Jobs, failure policy, restarts.

Upstream: kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go`` (``constructJob``,
``labelAndAnnotateObject``, ``getChildJobs``) and ``failure_policy.go``. Each replicated Job
``r`` with ``replicas: n`` runs as Jobs ``<jobset>-<r>-<0..n-1>``, whose labels and pod template
labels carry ``jobset.sigs.k8s.io/jobset-name``, ``jobset-uid``, ``replicatedjob-name``,
``replicatedjob-replicas``, ``job-index``, ``job-key`` and ``restart-attempt``
(``status.restarts`` when made). When a child Job fails: without ``spec.failurePolicy`` the
JobSet fails (``FailedJobs``); with one, the first rule matching the Job's failure reason and
replicated Job decides, and no match means ``RestartJobSet``: ``status.restarts`` goes up (and
``restartsCountTowardsMax``, until ``maxRestarts`` fails it with ``ReachedMaxRestarts``), every
Job of an earlier attempt is deleted (its pods with it) and recreated. ``FailJobSet`` fails it.
All Jobs complete: ``Completed``. A finished JobSet deletes its active Jobs (``jobSetFinished`` in
``Reconcile``). Not simulated: ``RestartJob`` actions (treated as
``RestartJobSet``), success policy, startup order, exclusive placement, coordinator, suspend.
"""

from __future__ import annotations

import hashlib
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.parts import SimParts
from podmedic_sim.reconciler import Reconciler
from podmedic_sim.store import NotFound, StoreError, WatchEvent, json_copy, now_rfc3339

SetKey = tuple[str, str]
PREFIX = "jobset.sigs.k8s.io/"
RESTARTS = PREFIX + "restart-attempt"
_RESTART_ACTIONS = ("RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts", "RestartJob",
                    "RestartJobAndIgnoreMaxRestarts")


def _true(obj: Obj, ctype: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == ctype and c.get("status") == "True"), None)


def _owned_by(job: Obj, uid: str) -> bool:
    return any(r.get("controller") and r.get("uid") == uid for r in job["metadata"].get("ownerReferences") or [])


class JobSetController(Reconciler):
    """Reconciles JobSets on their own and their Jobs' changes."""

    def __init__(self, parts: SimParts) -> None:
        super().__init__(parts)
        self._store, self._recorder = parts.store, parts.recorder

    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: JobSets and the Jobs they own."""
        meta = ev.obj["metadata"]
        ns = meta.get("namespace", "default")
        if ev.resource == "jobsets":
            if ev.type == "DELETED":
                for job in self._children(ns, meta.get("uid", "")):
                    self._delete(job)
            else:
                self.mark((ns, meta["name"]))
        elif ev.resource == "jobs":
            owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
            if owner and owner.get("kind") == "JobSet":
                self.mark((ns, owner["name"]))

    def _children(self, ns: str, uid: str) -> list[Obj]:
        return [j for j in self._store.list("jobs", ns) if _owned_by(j, uid)]

    def _delete(self, job: Obj) -> None:
        try:
            self._store.delete("jobs", job["metadata"].get("namespace", "default"), job["metadata"]["name"])
        except StoreError:
            return

    def reconcile(self, key: SetKey) -> None:
        """Apply the failure policy to failed Jobs, drop earlier attempts, create missing Jobs."""
        js = self._store.find("jobsets", *key)
        if js is None:
            return
        if _true(js, "Failed") or _true(js, "Completed"):  # finished: its active Jobs go (jobSetFinished)
            for job in self._children(key[0], js["metadata"]["uid"]):
                if not (_true(job, "Failed") or _true(job, "Complete")):
                    self._delete(job)
            return
        status: dict[str, Any] = dict(js.get("status") or {})
        restarts = int(status.get("restarts") or 0)
        jobs = []
        for job in self._children(key[0], js["metadata"]["uid"]):
            if int((job["metadata"].get("labels") or {}).get(RESTARTS, "0")) < restarts:
                self._delete(job)  # an earlier attempt's (background propagation: its pods follow)
            else:
                jobs.append(job)
        failed = [j for j in jobs if _true(j, "Failed")]
        if failed:
            status = self._on_failure(js, status, failed[0])
            if int(status.get("restarts") or 0) > restarts:
                for job in jobs:
                    self._delete(job)
                jobs = []
        if not any(c.get("type") == "Failed" for c in status.get("conditions") or []):
            names = {j["metadata"]["name"] for j in jobs}
            for rjob in (js.get("spec") or {}).get("replicatedJobs") or []:
                for index in range(int(rjob.get("replicas", 1))):
                    if f"{key[1]}-{rjob['name']}-{index}" not in names:
                        jobs.append(self._create(js, rjob, index, int(status.get("restarts") or 0)))
        self._write_status(key, js, status, jobs)

    def _on_failure(self, js: Obj, status: dict[str, Any], job: Obj) -> dict[str, Any]:
        policy = (js.get("spec") or {}).get("failurePolicy")
        name = job["metadata"]["name"]
        if policy is None:
            return _failed(status, "FailedJobs", "jobset failed due to one or more job failures", name)
        reason = str((_true(job, "Failed") or {}).get("reason", ""))
        rjob = (job["metadata"].get("labels") or {}).get(PREFIX + "replicatedjob-name", "")
        action = "RestartJobSet"
        for rule in policy.get("rules") or []:
            if (not rule.get("onJobFailureReasons") or reason in rule["onJobFailureReasons"]) and \
                    (not rule.get("targetReplicatedJobs") or rjob in rule["targetReplicatedJobs"]):
                action = str(rule.get("action"))
                break
        if action not in _RESTART_ACTIONS:
            return _failed(status, "FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action", name)
        counted = int(status.get("restartsCountTowardsMax") or 0)
        ignores_max = action.endswith("IgnoreMaxRestarts")
        if not ignores_max and counted >= int(policy.get("maxRestarts") or 0):
            return _failed(status, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts", name)
        self._recorder.event(js, "RestartJobSetFailurePolicyAction",
                             f"applying RestartJobSet failure policy action (first failed job: {name})",
                             component="jobset-controller", type_="Warning")
        return {**status, "restarts": int(status.get("restarts") or 0) + 1,
                "restartsCountTowardsMax": counted + (0 if ignores_max else 1)}

    def _create(self, js: Obj, rjob: Obj, index: int, restarts: int) -> Obj:
        meta, name = js["metadata"], f"{js['metadata']['name']}-{rjob['name']}-{index}"
        ns = meta.get("namespace", "default")
        marks = {PREFIX + "jobset-name": meta["name"], PREFIX + "jobset-uid": meta["uid"],
                 PREFIX + "replicatedjob-name": rjob["name"], RESTARTS: str(restarts),
                 PREFIX + "replicatedjob-replicas": str(rjob.get("replicas", 1)), PREFIX + "job-index": str(index),
                 PREFIX + "job-key": hashlib.sha1(f"{ns}/{name}".encode()).hexdigest()}
        job = json_copy(rjob.get("template") or {})
        jmeta = job.setdefault("metadata", {})
        pod_meta = job.setdefault("spec", {}).setdefault("template", {}).setdefault("metadata", {})
        for target in (jmeta, pod_meta):
            target["labels"] = {**(target.get("labels") or {}), **marks}
            target["annotations"] = {**(target.get("annotations") or {}), **marks}
        jmeta.update(name=name, namespace=ns, ownerReferences=[{
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}])
        created = self._store.create("jobs", {"apiVersion": "batch/v1", "kind": "Job", **job})
        return created

    def _write_status(self, key: SetKey, js: Obj, status: dict[str, Any], jobs: list[Obj]) -> None:
        by_rjob: dict[str, dict[str, int]] = {}
        for rjob in (js.get("spec") or {}).get("replicatedJobs") or []:
            by_rjob[rjob["name"]] = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for job in jobs:
            counts = by_rjob.get((job["metadata"].get("labels") or {}).get(PREFIX + "replicatedjob-name", ""))
            if counts is None:
                continue
            jstatus, parallelism = job.get("status") or {}, int((job.get("spec") or {}).get("parallelism") or 1)
            state = ("succeeded" if _true(job, "Complete") else "failed" if _true(job, "Failed") else
                     "ready" if int(jstatus.get("ready") or 0) >= parallelism else "active")
            counts[state] += 1
            if state == "ready":
                counts["active"] += 1
        status["replicatedJobsStatus"] = [{"name": n, **c} for n, c in by_rjob.items()]
        if by_rjob and all(c["succeeded"] == int(r.get("replicas", 1)) for r in js["spec"]["replicatedJobs"]
                           for n, c in by_rjob.items() if n == r["name"]):
            status = _finished(status, "Completed", "AllJobsCompleted", "jobset completed successfully")
        if status != js.get("status"):
            try:
                self._store.mutate("jobsets", key[0], key[1], lambda j: j.__setitem__("status", status))
            except NotFound:
                return


def _finished(status: dict[str, Any], ctype: str, reason: str, message: str) -> dict[str, Any]:
    cond = {"type": ctype, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": now_rfc3339()}
    return {**status, "conditions": [*(status.get("conditions") or []), cond]}


def _failed(status: dict[str, Any], reason: str, message: str, job: str) -> dict[str, Any]:
    return _finished(status, "Failed", reason, f"{message} (first failed job: {job})")
