"""Checkpoint stage: ask every affected pod (and its Job's other pods) to save its state.

Each pod declares its method with ``podmedic.io/checkpoint-method`` (``annotation``, ``http``,
``kubelet`` or ``none``; see docs/checkpoint-protocol.md and ``activities/checkpoints/``).
All pods are asked at once with one request id, fixed per incident run, and the activity
waits for every answer or the driver's timeout. podmedic first writes
``podmedic.io/checkpoint-request: <request-id>`` on each pod (the annotation method's
request; for the others, the record of what was asked), so a retried activity re-reads the
same request and the answers already given instead of asking twice.
"""

from __future__ import annotations

import asyncio
import time

from temporalio import activity

from activities.base import KubeActivities
from activities.checkpoints import spec as declared
from activities.checkpoints.hang import StallWatch
from activities.checkpoints.methods import CHANGED_BY, MethodRunner, recorded, result
from activities.heartbeat import Heartbeat
from podmedic.domain.models import PodRef
from podmedic.domain.steps import CheckpointInput, CheckpointReport, CheckpointStatus, PodCheckpoint
from podmedic.kube import podview
from podmedic.workload import protocol

SUPPORTED_METHODS = declared.METHODS
INCIDENT = "podmedic.io/checkpoint-incident"


class CheckpointActivities(KubeActivities):
    """Checkpoint requests; idempotent by request id."""

    async def _one(self, pod: PodRef, runner: MethodRunner) -> PodCheckpoint:
        """Ask one pod by its declared method (read from the live pod) and wait for its answer."""
        current = await self.api.get_pod(pod.namespace, pod.name)
        if current is None or current["metadata"].get("uid") != pod.uid:
            return result(pod, pod.checkpoint_method, CheckpointStatus.SKIPPED, "pod is gone")
        if (stopped := runner.stopped(pod, current)) is not None:
            return stopped
        notes = podview.annotations_of(current)
        containers = [c["name"] for c in (current.get("spec") or {}).get("containers") or []]
        try:
            spec = declared.parse(notes, containers)
        except declared.BadDeclaration as err:
            return result(pod, notes.get(protocol.METHOD), CheckpointStatus.SKIPPED, str(err))
        if spec is None:
            return result(pod, None, CheckpointStatus.SKIPPED, f"pod declares no {protocol.METHOD}")
        if spec.method == "none":
            return result(pod, "none", CheckpointStatus.SKIPPED, f"pod declares {protocol.METHOD}: none")
        done = recorded(pod, notes, runner.request_id, spec.method)
        if done is not None:
            return done
        if notes.get(protocol.REQUEST) != runner.request_id:
            await self.api.patch_pod_annotations(pod.namespace, pod.name, {
                protocol.REQUEST: runner.request_id, INCIDENT: runner.incident_id,
                CHANGED_BY: f"podmedic worker (checkpoint stage, {spec.method} request) for {runner.incident_id}",
            })
        if spec.method == "annotation":
            return await runner.annotation(pod)
        if spec.method == "http":
            return await runner.http(pod, spec)
        return await runner.kubelet(pod, spec, (current.get("spec") or {}).get("nodeName"))

    @activity.defn(name="request_checkpoints")
    async def request_checkpoints(self, inp: CheckpointInput) -> CheckpointReport:
        """Ask every pod at once, then wait for all answers, the driver's timeout, or the workload found hung
        (``activities/checkpoints/hang.py``): then the pods still waited for are ``hung``."""
        runner = MethodRunner(self.api, inp.request_id, inp.incident_id, time.monotonic() + inp.timeout_s,
                              inp.poll_s, device_dead=inp.device_dead)
        tasks = [asyncio.create_task(self._one(p, runner)) for p in inp.pods]
        pending = set(tasks)
        # The grace covers the last round trip of a method that started just before the deadline.
        hard_stop = runner.deadline + max(5.0, inp.poll_s * 2)
        heartbeat = Heartbeat()
        stall = StallWatch(inp.pods, inp.request_id, inp.hang_s,
                           lambda p: self.api.get_pod(p.namespace, p.name))
        hung: str | None = None
        while pending and time.monotonic() < hard_stop and hung is None:
            heartbeat(f"waiting for {len(pending)} of {len(tasks)} checkpoint(s)")
            _, pending = await asyncio.wait(pending, timeout=max(inp.poll_s, 0.05))
            hung = await stall.hung(runner.saving) if pending else None
        for task in pending:
            task.cancel()
        results: list[PodCheckpoint] = []
        for pod, task in zip(inp.pods, tasks, strict=True):
            if task.cancelled() or not task.done():
                method = pod.checkpoint_method
                results.append(result(pod, method, CheckpointStatus.HUNG, hung) if hung is not None
                               else runner.timed_out(pod, method or "?", "still waiting at the deadline"))
            elif (err := task.exception()) is not None:
                raise err
            else:
                results.append(task.result())
        return CheckpointReport(results=results, request_id=inp.request_id)
