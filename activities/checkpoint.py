"""Checkpoint stage: ask each affected workload to save its state before anything disruptive.

Protocol (pod annotations, see docs/checkpoint-protocol.md): the pod declares
``podmedic.io/checkpoint-method: annotation``; podmedic writes
``podmedic.io/checkpoint-request: <request-id>``; the workload saves and answers with
``podmedic.io/checkpoint-ack: <request-id>``, ``podmedic.io/checkpoint-id`` and
``podmedic.io/checkpoint-location``. The request id is fixed per incident run, so a retried
activity re-reads the same request instead of asking twice.
"""

from __future__ import annotations

import asyncio
import time

from temporalio import activity

from activities import podview
from activities.base import KubeActivities
from podmedic.models import PodRef
from podmedic.steps import CheckpointInput, CheckpointReport, CheckpointStatus, PodCheckpoint

SUPPORTED_METHODS = ("annotation",)


class CheckpointActivities(KubeActivities):
    """Checkpoint requests; idempotent by request id."""

    def _request(self, pod: PodRef, request_id: str) -> PodCheckpoint | None:
        """Write the request unless already written; returns a final answer when known now."""
        current = self.kube.get_pod(pod.namespace, pod.name)
        if current is None or current["metadata"].get("uid") != pod.uid:
            return PodCheckpoint(pod=pod.name, method=pod.checkpoint_method, status=CheckpointStatus.SKIPPED,
                                 checkpoint_id=pod.last_checkpoint_id, reason="pod is gone")
        notes = podview.annotations_of(current)
        if notes.get(podview.CHECKPOINT_REQUEST) != request_id:
            self.kube.patch_pod_annotations(pod.namespace, pod.name, {podview.CHECKPOINT_REQUEST: request_id})
        return None

    def _answer(self, pod: PodRef, request_id: str) -> PodCheckpoint | None:
        current = self.kube.get_pod(pod.namespace, pod.name)
        if current is None:
            return None
        notes = podview.annotations_of(current)
        if notes.get(podview.CHECKPOINT_ACK) != request_id:
            return None
        return PodCheckpoint(
            pod=pod.name, method=pod.checkpoint_method, status=CheckpointStatus.SAVED,
            checkpoint_id=notes.get(podview.CHECKPOINT_ID), location=notes.get(podview.CHECKPOINT_LOCATION),
        )

    @activity.defn(name="request_checkpoints")
    async def request_checkpoints(self, inp: CheckpointInput) -> CheckpointReport:
        """Ask every pod at once, then wait for all answers or the driver's timeout."""
        results: dict[str, PodCheckpoint] = {}
        waiting: list[PodRef] = []
        for pod in inp.pods:
            if pod.checkpoint_method is None:
                results[pod.name] = PodCheckpoint(
                    pod=pod.name, method=None, status=CheckpointStatus.SKIPPED, checkpoint_id=pod.last_checkpoint_id,
                    reason="pod declares no podmedic.io/checkpoint-method",
                )
            elif pod.checkpoint_method not in SUPPORTED_METHODS:
                results[pod.name] = PodCheckpoint(
                    pod=pod.name, method=pod.checkpoint_method, status=CheckpointStatus.SKIPPED,
                    checkpoint_id=pod.last_checkpoint_id,
                    reason=f"method {pod.checkpoint_method!r} unsupported (use: {', '.join(SUPPORTED_METHODS)})",
                )
            elif (early := await self.run(self._request, pod, inp.request_id)) is not None:
                results[pod.name] = early
            else:
                waiting.append(pod)
        deadline = time.monotonic() + inp.timeout_s
        while waiting and time.monotonic() < deadline:
            activity.heartbeat(f"waiting for {len(waiting)} checkpoint(s)")
            for pod in list(waiting):
                answer = await self.run(self._answer, pod, inp.request_id)
                if answer is not None:
                    results[pod.name] = answer
                    waiting.remove(pod)
            if waiting:
                await asyncio.sleep(inp.poll_s)
        for pod in waiting:
            results[pod.name] = PodCheckpoint(
                pod=pod.name, method=pod.checkpoint_method, status=CheckpointStatus.TIMED_OUT,
                checkpoint_id=pod.last_checkpoint_id,
                reason=f"no acknowledgement within {inp.timeout_s:g}s; last known checkpoint kept",
            )
        return CheckpointReport(results=[results[p.name] for p in inp.pods])
