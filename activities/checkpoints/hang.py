"""A workload that stopped progressing while its checkpoint is awaited: hung, so no answer will come.

A synchronous job needs every rank in step to save (a checkpoint is a collective too): when a rank's
device hangs it (Llama 3, arXiv 2407.21783 section 3.3.4: failures "often manifest as stalled
load/store operations"), every rank waits in a collective until the NCCL watchdog fires, 10 minutes
by default, and none can answer a checkpoint request. Waiting the driver's whole checkpoint timeout
for them only holds the job hung for longer. What the pods report says when that is so: every pod
that declares ``podmedic.io/reports-progress`` shows the step it reached in ``podmedic.io/progress``;
when none of those steps has moved for ``hang_s`` since the request and no pod has taken the request
up (acknowledged it, or answered that it is saving), the wait ends with the pods marked hung. The
clock restarts at every step seen to move: a write that was due before the hang may land after it.

A workload that reports no progress is never judged hung: without a signal, the timeout stands. Nor is
one with a pod checkpointed by its kubelet (CRIU needs no help from the process), nor one that
took the request up once: saving takes a synchronous job out of step on purpose.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from podmedic.domain.base import Obj
from podmedic.domain.models import PodRef
from podmedic.kube import podview
from podmedic.workload import protocol

ReadPod = Callable[[PodRef], Awaitable[Obj | None]]


class StallWatch:
    """Whether the pods asked for a checkpoint have all stood still for ``hang_s`` (0: never judged)."""

    def __init__(self, pods: list[PodRef], request_id: str, hang_s: float, read: ReadPod,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pods = pods
        self.request_id = request_id
        self.hang_s = hang_s
        self._read = read
        self._clock = clock
        self._steps: dict[str, str] = {}  # by pod uid: the step last seen
        self._since = clock()
        self._alive = False

    async def hung(self, saving: bool = False) -> str | None:
        """Why the workload is hung, or None (a pod took the request up, it reports nothing, or ``hang_s``
        has not passed since a step last moved). ``saving``: a pod answered that it is saving (an HTTP
        202). Reads the pods from the worker's cache when it holds them, as each method's own wait does."""
        self._alive = self._alive or saving
        if self.hang_s <= 0 or self._alive:
            return None
        reporting = 0
        for ref in self.pods:
            pod = await self._read(ref)
            if pod is None or pod["metadata"].get("uid") != ref.uid:
                continue
            notes = podview.annotations_of(pod)
            if notes.get(protocol.METHOD) == "kubelet" or notes.get(protocol.ACK) == self.request_id:
                self._alive = True
                return None
            if not podview.reports_progress(pod):
                continue
            step = notes.get(protocol.PROGRESS, "")
            if self._steps.setdefault(ref.uid, step) != step:  # it moved (or its last write was late): wait on
                self._steps[ref.uid], self._since = step, self._clock()
            reporting += 1
        if not reporting:
            return None
        still = self._clock() - self._since
        if still < self.hang_s:
            return None
        return (f"workload hung: no {protocol.PROGRESS} of its {reporting} reporting pod(s) moved for {still:.0f}s "
                f"(hang_s {self.hang_s:g}) and none took the request up; a job with a rank stuck cannot save")
