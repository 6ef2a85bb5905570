"""The Job controller (batch/v1): keeps ``parallelism`` pods running, replaces failed or
deleted ones, counts failures against ``backoffLimit`` and reports Job status.

Pods deleted before they finish count as failed, as with the real controller's
pod-tracking finalizers. Deleting a Job deletes its pods (garbage collection).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.claims import PodKey, random_suffix
from podmedic_sim.parts import SimParts
from podmedic_sim.pod_failure_policy import failure_action, replaces_terminating
from podmedic_sim.store import NotFound, WatchEvent, json_copy, now_rfc3339
from podmedic_sim.timers import Coalescer

JobKey = tuple[str, str]
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
TERMINAL = ("Succeeded", "Failed")


def owning_job(pod: Obj) -> tuple[str, str] | None:
    """(job name, job uid) of the Job controlling the pod, if any."""
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller"):
            return ref["name"], ref.get("uid", "")
    return None


class JobController:
    """Reconciles Jobs in coalesced passes."""

    def __init__(
        self, parts: SimParts, rng: random.Random, delete_pod: Callable[[Obj, str], None]
    ) -> None:
        self._store = parts.store
        self._recorder = parts.recorder
        self._rng = rng
        self._delete_pod = delete_pod
        self._dirty: set[JobKey] = set()
        self._timers = parts.timers
        self._t = parts.config.timings
        self._failed_at: dict[JobKey, float] = {}
        self._pass = Coalescer(parts.timers, self._t.job_requeue_s, self._reconcile_dirty)
        self.job_pods: dict[JobKey, set[PodKey]] = {}
        self._last_phase: dict[PodKey, tuple[str, str, bool]] = {}  # pod -> (uid, phase, deleting)
        self._lost: dict[JobKey, dict[str, Obj]] = {}  # pods deleted before finishing, by uid
        self._counted: dict[JobKey, set[str]] = {}
        self._admission = parts.admission
        self._expected: dict[JobKey, int] = {}  # pod creations in flight (admission webhooks)
        self.on_pod_created: list[Callable[[Obj, Obj], None]] = []

    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: Jobs and the pods they own."""
        meta = ev.obj["metadata"]
        if ev.resource == "jobs":
            key = (meta.get("namespace", "default"), meta["name"])
            if ev.type == "DELETED":
                for pkey in self.job_pods.pop(key, set()):
                    pod = self._store.find("pods", *pkey)
                    if pod is not None:
                        self._delete_pod(pod, "JobDeleted")
                self._lost.pop(key, None)
                self._counted.pop(key, None)
                self._failed_at.pop(key, None)
            else:
                self._mark(key)
            return
        if ev.resource != "pods":
            return
        owner = owning_job(ev.obj)
        if owner is None:
            return
        key = (meta.get("namespace", "default"), owner[0])
        pkey = (key[0], meta["name"])
        job = self._store.find("jobs", *key)
        if job is None or job["metadata"].get("uid") != owner[1]:
            # A deleted Job's pod (one of the same name may exist again: a JobSet restart): not counted.
            self.job_pods.get(key, set()).discard(pkey)
            return
        state = (
            meta.get("uid", ""),
            ev.obj.get("status", {}).get("phase", "Pending"),
            "deletionTimestamp" in meta,
        )
        if ev.type == "DELETED":
            self.job_pods.get(key, set()).discard(pkey)
            self._last_phase.pop(pkey, None)
            if state[1] not in TERMINAL:
                self._lost.setdefault(key, {})[state[0]] = ev.obj
            self._mark(key)
        else:
            self.job_pods.setdefault(key, set()).add(pkey)
            if self._last_phase.get(pkey) != state:
                self._last_phase[pkey] = state
                self._mark(key)

    def _replacement_delay(self, key: JobKey, failed: int) -> float:
        """Seconds until failed pods may be replaced: the controller's exponential back-off."""
        last = self._failed_at.get(key)
        if last is None or failed == 0:
            return 0.0
        ceiling = self._t.backoff_max_s if self._t.job_backoff_max_s is None else self._t.job_backoff_max_s
        backoff = min(self._t.backoff_base_s * 2 ** (failed - 1), ceiling)
        return float(last + backoff - self._timers.now())

    def _mark(self, key: JobKey) -> None:
        self._dirty.add(key)
        self._pass.kick()

    def _reconcile_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            self.reconcile(key)

    def reconcile(self, key: JobKey) -> None:
        """Bring one Job's pods and status in line with its spec."""
        job = self._store.find("jobs", *key)
        if job is None:
            return
        status = job.get("status") or {}
        if any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in status.get("conditions") or []
        ):
            return
        spec = job.get("spec", {})
        pods = [
            p
            for p in (self._store.find("pods", *k) for k in sorted(self.job_pods.get(key, set())))
            if p
        ]
        counted = self._counted.setdefault(key, set())
        failed, succeeded = int(status.get("failed", 0)), int(status.get("succeeded", 0))
        newly_failed = [pod for uid, pod in self._lost.pop(key, {}).items() if uid not in counted]
        replaces = replaces_terminating(job)
        for p in pods:
            uid, phase = p["metadata"]["uid"], p.get("status", {}).get("phase")
            # isPodFailed (pkg/controller/job): without podReplacementPolicy Failed, a deleted pod that did not
            # succeed counts as failed at once, for an orphan on a lost node never reaches the Failed phase.
            if replaces and phase not in TERMINAL and uid not in counted and "deletionTimestamp" in p["metadata"]:
                newly_failed.append(p)
            elif phase in TERMINAL and uid not in counted:
                if phase == "Failed":
                    newly_failed.append(p)
                else:
                    counted.add(uid)
                    succeeded += 1
        fail_job = ""
        for p in newly_failed:  # the Job's podFailurePolicy decides what each failure counts for
            counted.add(p["metadata"]["uid"])
            action, message = failure_action(job, p)
            failed += action != "Ignore"
            fail_job = fail_job or (message if action == "FailJob" else "")
        active = [
            p
            for p in pods
            if p.get("status", {}).get("phase") not in TERMINAL
            and "deletionTimestamp" not in p["metadata"]
        ]
        terminating = sum(1 for p in pods if "deletionTimestamp" in p["metadata"])
        conditions = list(status.get("conditions") or [])
        parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        completions = spec.get("completions")
        backoff_limit = int(
            spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6
        )
        if failed > backoff_limit or fail_job:
            conditions += _finished("Failed", "PodFailurePolicy", fail_job) if fail_job else _finished(
                "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            )
            for p in active:
                self._delete_pod(p, "PodFailurePolicy" if fail_job else "BackoffLimitExceeded")
            active = []
        elif completions is not None and succeeded >= int(completions):
            conditions += _finished(
                "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
            )
        elif not spec.get("suspend"):
            want = (
                parallelism
                if completions is None
                else min(parallelism, int(completions) - succeeded)
            )
            waiting_for = 0 if replaces else terminating  # podReplacementPolicy: Failed
            missing = max(want - len(active) - waiting_for - self._expected.get(key, 0), 0)
            if failed > int(status.get("failed", 0)):
                self._failed_at[key] = self._timers.now()
            delay = self._replacement_delay(key, failed)
            if missing and delay > 0:
                self._timers.call_later(delay, lambda: self._mark(key))
            else:
                for _ in range(missing):
                    made = self._create_pod(job)
                    if made is not None:
                        active.append(made)
        ready = sum(
            1
            for p in active
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in p.get("status", {}).get("conditions") or []
            )
        )
        new_status: dict[str, Any] = {
            **status,
            "active": len(active),
            "ready": ready,
            "failed": failed,
            "succeeded": succeeded,
            "terminating": terminating,
            "conditions": conditions,
            "startTime": status.get("startTime") or now_rfc3339(),
        }
        if new_status != status:
            try:
                self._store.mutate(
                    "jobs", key[0], key[1], lambda j: j.__setitem__("status", new_status)
                )
            except NotFound:
                return

    def _create_pod(self, job: Obj) -> Obj | None:
        """Create one pod of the Job: now, or (``None``) once admission webhooks answered."""
        jmeta = job["metadata"]
        template = json_copy(job.get("spec", {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        uid = jmeta["uid"]
        labels = {
            **(tmeta.get("labels") or {}),
            JOB_NAME_LABEL: jmeta["name"],
            "job-name": jmeta["name"],
            "controller-uid": uid,
            "batch.kubernetes.io/controller-uid": uid,
        }
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{jmeta['name']}-{random_suffix(self._rng)}",
                "namespace": jmeta.get("namespace", "default"),
                "labels": labels,
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": jmeta["name"],
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template.get("spec") or {},
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        pod["spec"].setdefault("restartPolicy", "Never")
        key = (jmeta.get("namespace", "default"), jmeta["name"])
        made = self._admission.create(pod, lambda p: self._created(job, p), lambda p: self._settled(key))
        if made is None:
            self._expected[key] = self._expected.get(key, 0) + 1
        return made

    def _settled(self, key: JobKey) -> None:
        self._expected[key] = max(0, self._expected.get(key, 0) - 1)
        self._mark(key)

    def _created(self, job: Obj, pod: Obj) -> Obj:
        created = self._store.create("pods", pod)
        self._recorder.event(
            job,
            "SuccessfulCreate",
            f"Created pod: {created['metadata']['name']}",
            component="job-controller",
        )
        for hook in self.on_pod_created:
            hook(job, created)
        return created


def _finished(ctype: str, reason: str, message: str) -> list[dict[str, Any]]:
    now = now_rfc3339()
    target = "FailureTarget" if ctype == "Failed" else "SuccessCriteriaMet"
    return [
        {
            "type": t,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
        for t in (target, ctype)
    ]
