"""Asking one pod for a checkpoint by its declared method, until an answer or the deadline.

Every method ends with the answer on the pod's own annotations (``checkpoint-ack`` = the
request id, ``checkpoint-id``, ``checkpoint-location``): the workload writes them for the
annotation method, podmedic for ``http`` and ``kubelet``. A retried activity finds them and
does not ask again, and the next incident reads the pod's last known checkpoint there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.parse

from activities.checkpoints import answers
from activities.checkpoints.spec import MethodSpec
from podmedic.domain.base import Obj
from podmedic.domain.models import PodRef
from podmedic.domain.steps import STOPPED_ON_DEAD_DEVICE, CheckpointStatus, PodCheckpoint
from podmedic.kube import podview
from podmedic.kube.gateway import NotFound, ProxyTimeout, ServerError, Throttled
from podmedic.kube.loop_calls import LoopCalls
from podmedic.workload import protocol
from podmedic.workload.protocol import ERROR

CHANGED_BY = "podmedic.io/checkpoint-changed-by"
# The API server answers these when it cannot reach the pod (yet): worth asking again before the deadline.
_UNREACHABLE = (502, 503)


def result(pod: PodRef, method: str | None, status: CheckpointStatus, reason: str = "",
           answer: answers.Answer | None = None) -> PodCheckpoint:
    """A pod's result; without a saved answer it carries the pod's last known checkpoint."""
    saved = answer is not None and answer.state == "saved"
    return PodCheckpoint(
        pod=pod.name, namespace=pod.namespace, method=method, status=status, reason=reason,
        checkpoint_id=answer.checkpoint_id if saved and answer else pod.last_checkpoint_id,
        location=answer.locations[0] if saved and answer and answer.locations else None,
        locations=list(answer.locations) if saved and answer else [],
    )


def recorded(pod: PodRef, notes: dict[str, str], request_id: str, method: str) -> PodCheckpoint | None:
    """The answer already on the pod for ``request_id`` (a retry, or the workload was quick);
    an acknowledgement with ``podmedic.io/checkpoint-error`` is the workload saying it failed."""
    if notes.get(protocol.ACK) != request_id:
        return None
    if notes.get(ERROR):
        return result(pod, method, CheckpointStatus.FAILED, f"workload answered: {notes[ERROR][:300]}")
    if not notes.get(protocol.CHECKPOINT_ID):
        return None
    where = notes.get(protocol.LOCATION) or ""
    answer = answers.Answer("saved", notes[protocol.CHECKPOINT_ID], [w for w in where.split(",") if w])
    return result(pod, method, CheckpointStatus.SAVED, answer=answer)


class MethodRunner:
    """Runs the methods for one request against one cluster."""

    def __init__(self, api: LoopCalls, request_id: str, incident_id: str, deadline: float, poll_s: float,
                 device_dead: bool = False):
        self.api = api
        self.request_id = request_id
        self.incident_id = incident_id
        self.deadline = deadline
        self.poll_s = poll_s
        self.device_dead = device_dead
        self.saving = False  # a pod answered that it is saving: its workload is not hung

    def stopped(self, pod: PodRef, current: Obj) -> PodCheckpoint | None:
        """A pod that will not answer, said now rather than at the deadline: one that has terminated
        (its phase is terminal, or it is being deleted), and on a device that failed for good one whose
        containers stopped (on a transient fault it may restart and answer)."""
        if self.device_dead and not podview.containers_running(current):
            return result(pod, pod.checkpoint_method, CheckpointStatus.SKIPPED, STOPPED_ON_DEAD_DEVICE)
        if (ended := podview.terminated(current)) is not None:
            return result(pod, pod.checkpoint_method, CheckpointStatus.SKIPPED,
                          f"pod has terminated ({ended}): nothing runs to save a checkpoint")
        return None

    def remaining(self) -> float:
        """Seconds left before the driver's checkpoint timeout."""
        return self.deadline - time.monotonic()

    async def _stopped_now(self, pod: PodRef) -> PodCheckpoint | None:
        """``stopped`` on the pod as it is now (an unreachable endpoint may be a dead process)."""
        current = await self.api.get_pod(pod.namespace, pod.name)
        return None if current is None else self.stopped(pod, current)

    def timed_out(self, pod: PodRef, method: str, detail: str = "") -> PodCheckpoint:
        """No answer in time: the last known checkpoint is kept."""
        why = f"no answer within the checkpoint timeout; last known checkpoint kept{': ' + detail if detail else ''}"
        return result(pod, method, CheckpointStatus.TIMED_OUT, why)

    async def _record(self, pod: PodRef, method: str, answer: answers.Answer) -> PodCheckpoint:
        notes = {protocol.ACK: self.request_id, protocol.CHECKPOINT_ID: answer.checkpoint_id or "",
                 protocol.LOCATION: ",".join(answer.locations),
                 CHANGED_BY: f"podmedic worker (checkpoint stage, {method} answer) for {self.incident_id}"}
        with contextlib.suppress(NotFound):  # the pod went away after saving: the answer still counts
            await self.api.patch_pod_annotations(pod.namespace, pod.name, dict(notes))
        return result(pod, method, CheckpointStatus.SAVED, answer=answer)

    async def annotation(self, pod: PodRef) -> PodCheckpoint:
        """Wait for the workload to answer the request annotation on its pod."""
        while self.remaining() > 0:
            try:
                current = await self.api.get_pod(pod.namespace, pod.name)
            except (ServerError, Throttled):  # a blip of the API server: look again at the next poll
                await asyncio.sleep(min(self.poll_s, max(self.remaining(), 0)))
                continue
            if current is None or current["metadata"].get("uid") != pod.uid:
                return result(pod, "annotation", CheckpointStatus.FAILED, "pod went away before answering")
            found = recorded(pod, podview.annotations_of(current), self.request_id, "annotation")
            if found is None:
                found = self.stopped(pod, current)
            if found is not None:
                return found
            await asyncio.sleep(min(self.poll_s, max(self.remaining(), 0)))
        return self.timed_out(pod, "annotation")

    async def http(self, pod: PodRef, spec: MethodSpec) -> PodCheckpoint:
        """POST the request id to the pod's endpoint through the API server's pod proxy."""
        name = urllib.parse.quote(f"{pod.name}:{spec.port}", safe=":")
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{name}/proxy{spec.path}"
        body = {"request_id": self.request_id, "incident": self.incident_id}
        last = ""
        while (left := self.remaining()) > 0:
            try:
                status, text = await self.api.proxy_post(path, body, headers={"Idempotency-Key": self.request_id},
                                                         timeout_s=left)
            except ProxyTimeout:
                return self.timed_out(pod, "http", f"POST {spec.path} on port {spec.port} did not answer")
            except ServerError as err:
                status, text = 0, str(err)
            answer = answers.http_answer(status, text, self.request_id)
            if answer.state == "saved":
                return await self._record(pod, "http", answer)
            if answer.state == "failed" and status not in _UNREACHABLE and status != 0:
                return result(pod, "http", CheckpointStatus.FAILED, answer.reason)
            if (gone := await self._stopped_now(pod)) is not None:
                return gone
            last = answer.reason
            self.saving = self.saving or answer.state == "pending"
            await asyncio.sleep(min(self.poll_s, max(self.remaining(), 0)))
        return self.timed_out(pod, "http", last)

    async def kubelet(self, pod: PodRef, spec: MethodSpec, node: str | None) -> PodCheckpoint:
        """Ask the pod's kubelet (node proxy) for a CRIU checkpoint of each container."""
        if not node:
            return result(pod, "kubelet", CheckpointStatus.FAILED, "pod is not bound to a node")
        got: list[answers.Answer] = []
        for container in spec.containers:
            left = self.remaining()
            if left <= 0:
                return self.timed_out(pod, "kubelet", f"container {container} not reached")
            path = f"/api/v1/nodes/{node}/proxy/checkpoint/{pod.namespace}/{pod.name}/{container}"
            try:
                status, text = await self.api.proxy_post(path, None, query=[("timeout", str(max(int(left), 1)))],
                                                         timeout_s=left)
            except ProxyTimeout:
                return self.timed_out(pod, "kubelet", f"kubelet on {node} did not answer for container {container}")
            except ServerError as err:
                return result(pod, "kubelet", CheckpointStatus.FAILED, str(err))
            got.append(answers.kubelet_answer(status, text, container))
        answer = answers.merge(got)
        if answer.state != "saved":
            return result(pod, "kubelet", CheckpointStatus.FAILED, answer.reason)
        return await self._record(pod, "kubelet", answer)
