"""StallWatch alone: when a checkpoint's pods count as hung (activities/checkpoints/hang.py).

The pods are the API's Pod shape with the workload protocol's annotations (docs/checkpoint-protocol.md);
the end-to-end behaviour, on the simulator's hung collectives, is tests/e2e_checkpoint/test_checkpoint_hang.py.
"""

from __future__ import annotations

import asyncio

from activities.checkpoints.hang import StallWatch
from podmedic.domain.base import Obj
from podmedic.domain.models import PodRef
from podmedic.workload import protocol

REFS = [PodRef(namespace="ml", name=f"rank-{i}", uid=f"u{i}") for i in range(2)]


class Pods:
    """What the watch reads, with a clock the test moves."""

    def __init__(self, **extra: str) -> None:
        self.now = 0.0
        self.notes = {r.uid: {protocol.REPORTS_PROGRESS: "true", protocol.PROGRESS: "7", **extra} for r in REFS}

    async def read(self, ref: PodRef) -> Obj | None:
        return {"metadata": {"name": ref.name, "uid": ref.uid, "annotations": dict(self.notes[ref.uid])}}

    def watch(self, hang_s: float = 10.0) -> StallWatch:
        return StallWatch(REFS, "req-1", hang_s, self.read, clock=lambda: self.now)


def _hung(watch: StallWatch, saving: bool = False) -> str | None:
    return asyncio.run(watch.hung(saving))


def test_still_steps_for_hang_s_are_a_hang() -> None:
    pods = Pods()
    watch = pods.watch()
    assert _hung(watch) is None
    pods.now = 9.9
    assert _hung(watch) is None
    pods.now = 10.0
    why = _hung(watch)
    assert why is not None and "2 reporting pod(s)" in why and "hang_s 10" in why


def test_a_step_that_moves_starts_the_wait_again() -> None:
    pods = Pods()
    watch = pods.watch()
    assert _hung(watch) is None
    pods.now = 8.0
    pods.notes["u1"][protocol.PROGRESS] = "8"
    assert _hung(watch) is None
    pods.now = 17.9
    assert _hung(watch) is None
    pods.now = 18.0
    assert _hung(watch) is not None


def test_a_request_taken_up_is_never_a_hang() -> None:
    for pods, saving in ((Pods(**{protocol.ACK: "req-1"}), False), (Pods(), True),
                         (Pods(**{protocol.METHOD: "kubelet"}), False)):
        watch = pods.watch()
        pods.now = 100.0
        assert _hung(watch, saving) is None
    pods = Pods(**{protocol.ACK: "an-older-request"})  # an answer to another request says nothing
    watch = pods.watch()
    pods.now = 100.0
    assert _hung(watch) is not None


def test_without_a_signal_or_with_hang_s_off_the_timeout_stands() -> None:
    silent, off = Pods(), Pods()
    for notes in silent.notes.values():
        notes.pop(protocol.REPORTS_PROGRESS)
    watches = [silent.watch(), off.watch(hang_s=0)]
    silent.now = off.now = 100.0
    assert [_hung(w) for w in watches] == [None, None]
