"""JobSet's in-place restart (KEP-467, ``spec.failurePolicy.restartStrategy: InPlaceRestart``): the agent in
every pod and the controller's barrier.

Upstream: kubernetes-sigs/jobset ``keps/467-InPlaceRestart``, ``pkg/controllers/in_place_restart.go``
(``reconcileInPlaceRestart``) and ``cmd/in-place-restart-agent/main.go`` in main-container mode: the agent
is the container's entrypoint and runs the worker; the container's ``restartPolicyRules`` restart it in
place on a non-zero exit (``Restart``, KEP-5307), and the Job's ``backoffLimit`` (MaxInt32) with
``podReplacementPolicy: Failed`` recreates a failed pod alone, never the whole JobSet.

- **The agent**, when its container starts, writes the pod annotation
  ``jobset.sigs.k8s.io/in-place-restart-attempt``: 0 on a JobSet's first start, else the JobSet's
  ``status.currentInPlaceRestartAttempt`` + 1; its worker waits at a barrier until the JobSet's current
  attempt equals its own. When ``status.previousInPlaceRestartAttempt`` reaches its attempt, it exits
  with ``IN_PLACE_RESTART_EXIT_CODE`` (1): its container restarts in place and joins the next attempt.
- **The controller** reads the attempts of the JobSet's pods (not Failed, annotated): all of the
  template's pods at one attempt make it the current one (the barriers lift); otherwise, once any pod is
  past 0, the previous attempt becomes the highest minus one (the pods behind restart in place). A
  container restarted more than ``maxRestarts`` times, or an attempt past ``maxRestarts`` (less the
  JobSet's uncounted restarts), fails the JobSet (``ReachedMaxRestarts``).

A rank whose GPU is broken restarts in place on it and fails again: in-place restart alone never moves a
pod off a bad device. Not simulated: the sidecar-container mode, the agent's bypass annotation.
"""

from __future__ import annotations

from typing import Any

from podmedic.domain.base import Obj
from podmedic.domain.workloads import IN_PLACE_RESTART_ATTEMPT as ATTEMPT
from podmedic.domain.workloads import restarts_in_place
from podmedic_sim.kubelet import Kubelet
from podmedic_sim.kubelet_status import ContainerRt, PodRt
from podmedic_sim.parts import SimParts
from podmedic_sim.reconciler import Reconciler
from podmedic_sim.store import NotFound, WatchEvent, now_rfc3339
from podmedic_sim.training_groups import JOBSET_NAME

IN_PLACE_RESTART_EXIT_CODE = 1
"""The agent's ``IN_PLACE_RESTART_EXIT_CODE`` default."""
def _attempt(pod: Obj) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ATTEMPT)
    try:
        value = int(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


def _pods_total(js: Obj) -> int:
    """``getTotalNumberOfPods``: replicas times parallelism of every replicated Job."""
    return sum(int(r.get("replicas", 1)) * int(((r.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
               for r in (js.get("spec") or {}).get("replicatedJobs") or [])


class InPlaceRestarts(Reconciler):
    """The agents of every in-place JobSet's pods, and the controller's part that moves their barrier."""

    def __init__(self, parts: SimParts, kubelet: Kubelet) -> None:
        super().__init__(parts)
        self._store, self._recorder, self._kubelet = parts.store, parts.recorder, kubelet
        self.attempts: dict[str, int] = {}  # the agent's own attempt, by pod uid (gone when its container stops)
        self.barred: set[str] = set()  # pod uids whose worker waits at the barrier
        kubelet.hooks.append(self)

    def at_barrier(self, uid: str) -> bool:
        """Whether the pod's worker waits for its JobSet's other pods (it trains no step)."""
        return uid in self.barred

    # -- the agent -----------------------------------------------------------------------------
    def _jobset(self, rt: PodRt) -> Obj | None:
        pod = self._store.find("pods", *rt.key)
        name = ((pod or {}).get("metadata", {}).get("labels") or {}).get(JOBSET_NAME)
        js = self._store.find("jobsets", rt.key[0], name) if name else None
        return js if js is not None and restarts_in_place(js) else None

    def on_container_started(self, rt: PodRt, c: ContainerRt) -> None:
        """Kubelet hook: the agent starts, takes its attempt and holds its worker at the barrier."""
        js = self._jobset(rt)
        if js is None or c is not rt.containers[0]:
            return
        current = (js.get("status") or {}).get("currentInPlaceRestartAttempt")
        attempt = 0 if current is None else int(current) + 1
        self.attempts[rt.uid], uid = attempt, rt.uid
        self.barred.add(uid)
        try:
            self._store.mutate("pods", rt.key[0], rt.key[1],
                               lambda p: p["metadata"].setdefault("annotations", {}).__setitem__(ATTEMPT, str(attempt)))
        except NotFound:
            return
        self._agent(rt, js)

    def on_container_stopped(self, rt: PodRt, c: ContainerRt) -> None:
        """Kubelet hook: the agent's memory goes with its container."""
        if c is rt.containers[0]:
            self.attempts.pop(rt.uid, None)
            self.barred.discard(rt.uid)

    def absorbs_failure(self, rt: PodRt, c: ContainerRt) -> bool:
        """Kubelet hook: the agent never keeps a failed worker's container running."""
        return False

    def _agent(self, rt: PodRt, js: Obj) -> None:
        """The agent's reconcile: exit to restart in place, or lift the barrier."""
        attempt, status = self.attempts.get(rt.uid), js.get("status") or {}
        c = rt.containers[0] if rt.containers else None
        if attempt is None or c is None or c.state != "running" or rt.deleting:
            return
        previous, current = status.get("previousInPlaceRestartAttempt"), status.get("currentInPlaceRestartAttempt")
        if previous is not None and attempt <= int(previous):
            self._kubelet.exit_container(rt, c, IN_PLACE_RESTART_EXIT_CODE, "Error")
        elif rt.uid in self.barred and current is not None and attempt == int(current):
            self.barred.discard(rt.uid)

    # -- the controller ------------------------------------------------------------------------
    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: a JobSet's status moves its agents; its pods' attempts move the controller."""
        meta = ev.obj["metadata"]
        ns = meta.get("namespace", "default")
        if ev.resource == "jobsets" and ev.type != "DELETED" and restarts_in_place(ev.obj):
            for pkey, rt in list(self._kubelet.pods.items()):
                if pkey[0] == ns and rt.uid in self.attempts:
                    js = self._jobset(rt)
                    if js is not None and js["metadata"]["name"] == meta["name"]:
                        self._agent(rt, js)
        elif ev.resource == "pods" and JOBSET_NAME in (meta.get("labels") or {}):
            self.mark((ns, meta["labels"][JOBSET_NAME]))

    def reconcile(self, key: tuple[str, str]) -> None:
        """``reconcileInPlaceRestart``: fail past the limits, else move the current or previous attempt."""
        js = self._store.find("jobsets", *key)
        if js is None or not restarts_in_place(js) or any(c.get("type") in ("Failed", "Completed") and c.get(
                "status") == "True" for c in (js.get("status") or {}).get("conditions") or []):
            return
        pods = [p for p in self._store.list("pods", key[0])
                if (p["metadata"].get("labels") or {}).get(JOBSET_NAME) == key[1]]
        status: dict[str, Any] = dict(js.get("status") or {})
        max_restarts = int(js["spec"]["failurePolicy"].get("maxRestarts") or 0)
        restarted = max((int(s.get("restartCount") or 0) for p in pods
                         for s in (p.get("status") or {}).get("containerStatuses") or []), default=0)
        attempts = [a for p in pods if (p.get("status") or {}).get("phase") != "Failed"
                    for a in (_attempt(p),) if a is not None]
        uncounted = int(status.get("restarts") or 0) - int(status.get("restartsCountTowardsMax") or 0)
        if restarted > max_restarts or max(attempts, default=0) - uncounted > max_restarts:
            self._fail(key, js)
            return
        if len(attempts) == _pods_total(js) and len(set(attempts)) == 1:
            status["currentInPlaceRestartAttempt"] = attempts[0]
        elif attempts and max(attempts) > 0:
            previous, before = max(attempts) - 1, status.get("previousInPlaceRestartAttempt")
            if before is None or previous > int(before):
                status["previousInPlaceRestartAttempt"] = previous
        if status != (js.get("status") or {}):
            try:
                self._store.mutate("jobsets", key[0], key[1], lambda j: j.__setitem__("status", status))
            except NotFound:
                return

    def _fail(self, key: tuple[str, str], js: Obj) -> None:
        message = "jobset failed due to reaching max number of restarts"
        cond = {"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts", "message": message,
                "lastTransitionTime": now_rfc3339()}
        self._recorder.event(js, "ReachedMaxRestarts", message, component="jobset-controller", type_="Warning")

        def fail(j: Obj) -> None:
            status = j.setdefault("status", {})
            status["conditions"] = [*(status.get("conditions") or []), cond]

        try:
            self._store.mutate("jobsets", *key, fail)
        except NotFound:
            return
