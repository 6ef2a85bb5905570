"""The stall incident's calls: read a workload's steps, wait for them to move, end one rank.

A workload's pods are found by its controller's label (``podmedic/domain/stall.py``: a JobSet's, a
LeaderWorkerSet group's, a Job's), so a restarted workload's new pods are read too; a workload known only by
an owner is read by the pods the stall named. Steps are ``podmedic.io/progress`` of the pods that declare
the progress protocol and run.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel, Field
from temporalio import activity

from activities.base import KubeActivities
from activities.heartbeat import Heartbeat
from podmedic.domain.base import Obj
from podmedic.domain.models import PodKey
from podmedic.domain.stall import pods_selector
from podmedic.kube import podview
from podmedic.workload import protocol


class WatchStepsInput(BaseModel):
    """Read a workload's steps until one moves from ``since`` (or from its first reading), or ``timeout_s``."""

    namespace: str
    kind: str
    name: str
    group: str = Field("", description="A LeaderWorkerSet's group index: only that group's pods are read.")
    pods: list[PodKey] = Field(description="The pods the stall named: read by name when the kind has no label.")
    since: dict[str, str] = Field(description="The steps the stall stood at, by pod uid.")
    timeout_s: float = Field(0, ge=0, description="0: one reading.")
    poll_s: float = Field(5, gt=0)
    gone_moves: bool = Field(True, description="A stalled pod gone counts as moving (its workload restarts), "
                                               "and so does any change of step: so before acting; after ending "
                                               "a rank, only a step forward counts (a step back to the "
                                               "checkpoint is the restart, not progress).")


class StepsReading(BaseModel):
    """Whether the steps moved, and how they stand."""

    moved: str = Field("", description="What moved (empty: nothing did).")
    steps: dict[str, str] = Field(default_factory=dict, description="pod name -> step, as last read.")


class EndRankInput(BaseModel):
    """End one rank of a stalled workload: delete its pod (this UID only) within ``grace_s``."""

    incident_id: str
    pod: PodKey
    grace_s: float = Field(ge=0)


def _ahead(before: str, now: str) -> bool:
    """A step past ``before``: the larger number, or (a step that is no number) another value."""
    try:
        return float(now) > float(before)
    except ValueError:
        return now != before


def moved_since(pods: list[Obj], since: dict[str, str], first: dict[str, str], gone_moves: bool = True) -> str:
    """What moved. With ``gone_moves`` (before acting): a stalled pod's step changed, a stalled pod is gone
    (its workload restarts), or a pod the stall did not know moved from its first reading. Without it
    (after ending a rank): a pod's step went forward from its last reading (``first`` keeps the readings):
    a workload that restarts rolls its pods' steps back to its checkpoint, then trains on from there."""
    now = {str(p["metadata"].get("uid")): p for p in pods}
    if not gone_moves:
        for uid, pod in now.items():
            current = podview.annotations_of(pod).get(protocol.PROGRESS, "")
            before = first.get(uid, since.get(uid, current))
            if _ahead(before, current):
                new = "" if uid in since else " (new)"
                return f"{pod['metadata']['name']}{new} moved: step {before} -> {current}"
            first[uid] = current
        return ""
    for uid, step in since.items():
        stalled = now.get(uid)
        if stalled is None:
            return f"a stalled pod is gone (uid {uid}): the workload is restarting"
        current = podview.annotations_of(stalled).get(protocol.PROGRESS, "")
        if current != step:
            return f"{stalled['metadata']['name']} moved: step {step} -> {current}"
    for uid, pod in now.items():
        if uid in since:
            continue
        current = podview.annotations_of(pod).get(protocol.PROGRESS, "")
        if first.setdefault(uid, current) != current:
            return f"{pod['metadata']['name']} (new) moved: step {first[uid]} -> {current}"
    return ""


def reporting(pods: list[Obj]) -> list[Obj]:
    """The pods that run and report a step (``podview.step_of``, as the ingest judges them)."""
    return [p for p in pods if podview.step_of(p) is not None]


class StallActivities(KubeActivities):
    """Reads and the one action of a stall incident; idempotent (the deletion is by UID)."""

    async def _pods(self, inp: WatchStepsInput) -> list[Obj]:
        selector = pods_selector(inp.kind, inp.name, inp.group)
        if selector:
            return reporting(await self.api.list_pods(inp.namespace, selector))
        found = [await self.api.get_pod(p.namespace, p.name) for p in inp.pods]
        return reporting([p for p in found if p is not None])

    @activity.defn(name="watch_steps")
    async def watch_steps(self, inp: WatchStepsInput) -> StepsReading:
        """Read until a step moves or ``timeout_s`` passes, heartbeating."""
        deadline, first, heartbeat = time.monotonic() + inp.timeout_s, dict[str, str](), Heartbeat()
        while True:
            pods = await self._pods(inp)
            moved = moved_since(pods, inp.since, first, inp.gone_moves)
            steps = {p["metadata"]["name"]: podview.annotations_of(p).get(protocol.PROGRESS, "") for p in pods}
            if moved or time.monotonic() >= deadline:
                return StepsReading(moved=moved, steps=steps)
            heartbeat(steps)
            await asyncio.sleep(min(inp.poll_s, max(0.0, deadline - time.monotonic())))

    @activity.defn(name="end_stalled_rank")
    async def end_stalled_rank(self, inp: EndRankInput) -> bool:
        """Delete the rank's pod (its UID only: a retry never ends its replacement); ``False`` when it was
        gone already."""
        pod = await self.api.get_pod(inp.pod.namespace, inp.pod.name, fresh=True)
        if pod is None or pod["metadata"].get("uid") != inp.pod.uid:
            return False
        await self.api.delete_pod(inp.pod.namespace, inp.pod.name, inp.pod.uid, inp.grace_s)
        return True
