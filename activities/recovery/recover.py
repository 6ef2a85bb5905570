"""Recover stage: the rungs of the recovery ladder, each acting once and then verifying.

Verification is the same for every rung (``activities/recovery/verify.py``): the pod (or its
replacement) is Ready, every device it reports in ``allocatedResourcesStatus`` is Healthy,
and a workload that reports progress has moved past its value at the restart, all within
the rung's timeout. The mechanisms live in ``activities/recovery/``.
"""

from __future__ import annotations

from temporalio import activity

from activities.base import KubeActivities
from activities.claim_cache import ReservedClaims
from activities.heartbeat import kept_alive
from activities.recovery import inplace
from activities.recovery.reschedule import Rescheduler
from activities.recovery.verify import Verification, poll
from podmedic.domain.base import Obj
from podmedic.domain.steps import RecoverInput, RecoveryResult
from podmedic.kube import podview
from podmedic.kube.gateway import Conflict, KubeGateway

RESTART_BASELINE = inplace.BASELINE


class RecoverActivities(KubeActivities):
    """In-place restart, same-node and any-node reschedule; idempotent by request id."""

    def __init__(self, kube: KubeGateway, claims: ReservedClaims | None = None) -> None:
        super().__init__(kube)
        self.claims = claims if claims is not None else ReservedClaims(self.api.get_claim)

    # -- in-place restart ----------------------------------------------------------------------
    async def _request_restart(self, inp: RecoverInput) -> tuple[str, dict[str, int]] | str:
        """Record the request on the pod (once per request id), then act; returns the trigger
        container and the restart counts before, or why the pod cannot restart in place.

        The pod is read from the pod cache first, which may be behind: the request is written
        only over the version it was decided on (a merge patch naming its resourceVersion), so a
        retry that read an old pod is refused and reads again instead of acting twice.
        """
        for fresh in (False, True, True):
            pod = await self.api.get_pod(inp.pod.namespace, inp.pod.name, fresh=fresh)
            if pod is None or pod["metadata"].get("uid") != inp.pod.uid:
                return "pod is gone"
            planned = inplace.plan(pod, inp.in_place)
            if isinstance(planned, str):
                return planned
            container, code = planned
            baseline = inplace.already_requested(pod, inp.request_id, inp.in_place)
            if baseline is not None:
                return container, baseline  # a retry: acted already (or was about to); never twice
            notes = inplace.request_annotations(pod, inp.request_id, inp.in_place, inp.incident_id, container, code)
            try:
                await self.api.patch_pod_annotations(inp.pod.namespace, inp.pod.name, notes,
                                                          resource_version=pod["metadata"].get("resourceVersion"))
            except Conflict:
                continue  # changed since it was read: decide again on the pod as it is
            if inp.in_place.mechanism == "exec_signal":
                command = [part.replace("{signal}", inp.in_place.signal) for part in inp.in_place.command]
                # Short: the activity heartbeats only between calls, and a kill answers at once.
                rc, output = await self.api.exec_in_container(inp.pod.namespace, inp.pod.name, container, command,
                                                              timeout_s=5.0)
                if rc != 0:
                    return f"exec {' '.join(command)} in {container} exited {rc}: {output or 'no output'}"
            return container, inplace.container_restarts(pod)
        raise Conflict(f"pod {inp.pod.namespace}/{inp.pod.name}: changed at every try to request its restart", 409)

    async def _restarted(self, check: Verification, inp: RecoverInput, container: str,
                         baseline: dict[str, int]) -> Obj | None:
        pod = await self.api.get_pod(inp.pod.namespace, inp.pod.name)
        if pod is None or pod["metadata"].get("uid") != inp.pod.uid:
            return check.offer(None)
        return check.offer(pod if inplace.restarted(pod, baseline, inp.in_place, container) else None)

    @activity.defn(name="restart_in_place")
    async def restart_in_place(self, inp: RecoverInput) -> RecoveryResult:
        """Restart the pod's container(s) in place by the driver's mechanism (exit_code,
        exec_signal, restart_all_containers): pod UID and device allocation are kept."""
        mechanism = inp.in_place.mechanism
        if inp.pod.phase in ("Failed", "Succeeded"):
            return RecoveryResult(verified=False, action="in_place_restart", pod=inp.pod,
                                  detail=f"pod has terminated (phase {inp.pod.phase}): nothing to restart in place")
        asked = await kept_alive(self._request_restart(inp))
        if isinstance(asked, str):
            return RecoveryResult(verified=False, action="in_place_restart",
                                  pod=None if asked == "pod is gone" else inp.pod, detail=f"{mechanism}: {asked}")
        container, baseline = asked
        check = Verification(inp.verify_progress)
        pod = await poll(lambda: self._restarted(check, inp, container, baseline), inp.timeout_s, inp.poll_s,
                         "restart in place")
        if pod is None:
            return RecoveryResult(verified=False, action="in_place_restart", pod=inp.pod,
                                  detail=check.failure(inp.timeout_s, f"{mechanism} restart"))
        ref = podview.pod_ref(pod)
        counts = inplace.container_restarts(pod)
        grown = ", ".join(f"{n} {baseline.get(n, 0)} -> {counts.get(n, 0)}" for n in sorted(counts))
        return RecoveryResult(
            verified=True, action="in_place_restart", pod=ref, same_node=True,
            devices=sorted(d.resource_id for d in (await self.claims.device_health(pod)).devices),
            detail=f"{mechanism}: same UID, restartCount {grown}, devices Healthy; {check.progress_note(pod)}",
        )

    # -- reschedule ------------------------------------------------------------------------------
    @activity.defn(name="reschedule_same_node")
    async def reschedule_same_node(self, inp: RecoverInput) -> RecoveryResult:
        """Evict (PDBs respected) and verify a replacement that prefers the same node, when it
        has a free healthy device (Job pods: node label; bare pods: podmedic's replacement)."""
        return await Rescheduler(self.api, inp, "same_node", self.claims).attempt()

    @activity.defn(name="reschedule_any_node")
    async def reschedule_any_node(self, inp: RecoverInput) -> RecoveryResult:
        """Evict (PDBs respected) and verify a replacement wherever a healthy device is free."""
        return await Rescheduler(self.api, inp, "any_node", self.claims).attempt()
