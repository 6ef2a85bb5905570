"""Recover stage: the rungs of the recovery ladder, each acting once and then verifying.

Verification is the same for every rung: the pod (or its replacement) is Ready and every
device it reports in ``allocatedResourcesStatus`` is Healthy, within the rung's timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities import podview
from activities.base import KubeActivities
from podmedic.steps import RecoverInput, RecoveryResult

Obj = podview.Obj
RESTART_BASELINE = "podmedic.io/restart-baseline"


class RecoverActivities(KubeActivities):
    """In-place restart and same-node reschedule; idempotent by request id."""

    async def _wait(self, inp: RecoverInput, check: Callable[[], Any], *details: Any) -> Any:
        """Poll ``check`` (in a thread) until it returns a value or the rung times out;
        ``details`` are heartbeated so a retried attempt can pick up where this one was."""
        deadline = time.monotonic() + inp.timeout_s
        while True:
            found = await self.run(check)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                return None
            activity.heartbeat(*details)
            await asyncio.sleep(inp.poll_s)

    # -- in-place restart ----------------------------------------------------------------------
    def _request_restart(self, inp: RecoverInput) -> int | None:
        pod = self.kube.get_pod(inp.pod.namespace, inp.pod.name)
        if pod is None or pod["metadata"].get("uid") != inp.pod.uid:
            return None
        notes = podview.annotations_of(pod)
        if notes.get(podview.RESTART_REQUEST) == inp.request_id and RESTART_BASELINE in notes:
            return int(notes[RESTART_BASELINE])  # asked already (a retry): keep the first baseline
        baseline = podview.restart_count(pod)
        self.kube.patch_pod_annotations(
            inp.pod.namespace, inp.pod.name,
            {podview.RESTART_REQUEST: inp.request_id, RESTART_BASELINE: str(baseline)},
        )
        return baseline

    def _restarted(self, inp: RecoverInput, baseline: int) -> Obj | None:
        pod = self.kube.get_pod(inp.pod.namespace, inp.pod.name)
        if pod is None or pod["metadata"].get("uid") != inp.pod.uid:
            return None
        ok = podview.restart_count(pod) > baseline and podview.is_ready(pod) and podview.devices_healthy(pod)
        return pod if ok else None

    @activity.defn(name="restart_in_place")
    async def restart_in_place(self, inp: RecoverInput) -> RecoveryResult:
        """Ask the workload to exit with the code its ``restartPolicyRules`` restart in place
        (KEP-5307): pod UID and device allocation are kept; restartCount grows."""
        if inp.pod.phase in ("Failed", "Succeeded"):
            return RecoveryResult(verified=False, action="in_place_restart", pod=inp.pod,
                                  detail=f"pod has terminated (phase {inp.pod.phase}): nothing to restart in place")
        baseline = await self.run(self._request_restart, inp)
        if baseline is None:
            return RecoveryResult(verified=False, action="in_place_restart", pod=None, detail="pod is gone")
        pod = await self._wait(inp, lambda: self._restarted(inp, baseline), "restart in place")
        if pod is None:
            return RecoveryResult(
                verified=False, action="in_place_restart", pod=inp.pod,
                detail=f"not Ready with Healthy devices within {inp.timeout_s:g}s after the restart request",
            )
        ref = podview.pod_ref(pod)
        return RecoveryResult(
            verified=True, action="in_place_restart", pod=ref, same_node=True,
            devices=sorted(podview.device_statuses(pod)),
            detail=f"same UID, restartCount {baseline} -> {ref.restart_count}, devices Healthy",
        )

    # -- reschedule to the same node -----------------------------------------------------------
    def _job_pods(self, inp: RecoverInput) -> list[Obj]:
        return self.kube.list_pods(inp.pod.namespace, f"batch.kubernetes.io/job-name={inp.pod.job}")

    def _replacement(self, inp: RecoverInput, known: set[str]) -> Obj | None:
        for pod in self._job_pods(inp):
            uid = pod["metadata"].get("uid")
            if uid in known or not podview.is_ready(pod) or not podview.devices_healthy(pod):
                continue
            if inp.device.resource_id in podview.device_statuses(pod):
                continue
            return pod
        return None

    @activity.defn(name="reschedule_same_node")
    async def reschedule_same_node(self, inp: RecoverInput) -> RecoveryResult:
        """Evict through the Eviction API and verify the Job's replacement runs on a healthy
        device; the scheduler's image locality and the device taint steer it to the same node."""
        if not inp.pod.job:
            return RecoveryResult(
                verified=False, action="same_node", pod=inp.pod,
                detail="bare pod: no controller recreates it (run GPU work under a Job)",
            )
        details = activity.info().heartbeat_details
        if details:
            known = set(details[0])  # a retry: the pods that existed before the first eviction
        else:
            # Siblings that existed with the affected pod are not replacements; pods created
            # after it are (the Job controller may have replaced a failed pod already).
            known = {
                p["metadata"]["uid"] for p in await self.run(self._job_pods, inp)
                if not p["metadata"].get("creationTimestamp", "") > inp.pod.created
            } | {inp.pod.uid}
            activity.heartbeat(sorted(known), "evicting")
        await self.run(self.kube.evict_pod, inp.pod.namespace, inp.pod.name, inp.pod.uid)
        pod = await self._wait(inp, lambda: self._replacement(inp, known), sorted(known), "replacement")
        if pod is None:
            return RecoveryResult(
                verified=False, action="same_node", pod=inp.pod,
                detail=f"no Ready replacement with Healthy devices within {inp.timeout_s:g}s",
            )
        ref = podview.pod_ref(pod)
        same = ref.node == inp.pod.node
        return RecoveryResult(
            verified=True, action="same_node", pod=ref, same_node=same,
            devices=sorted(podview.device_statuses(pod)),
            detail=f"replacement {ref.name} Ready on {ref.node} ({'same' if same else 'another'} node)",
        )
