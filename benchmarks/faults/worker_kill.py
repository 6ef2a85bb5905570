"""Scenario (a): the worker SIGKILLed at every stage of an incident, then started again.

One incident per stage, opened one after the other while the earlier ones carry on. For
each, the simulator holds the stage's own Kubernetes call (a ``hold`` API fault rule on the
worker's calls of that kind, every incident's, until the kill; the ticket stage: the vendor desk
holds its answer after filing), the suite waits until the incident's ``PodmedicPhase`` shows the
stage and the held call is in flight, SIGKILLs the worker, releases the call (the simulator then
serves it) and starts a new worker. The killed attempt's request did reach the API server, so the
new worker's retry meets the result of the old one: that is what must not be done twice.

The checkpoint stage makes no call while it waits: its reads of the pod come from the worker's
pod cache. Its in-flight mark is the pod itself: the request annotation written (the killed
attempt acted) and no answer yet (the job answers slowly).

The fence is a local activity, run inside the incident's first workflow task, so its phase is
never published: the taint stage waits for ``Opened`` (the phase the incident starts with,
shown until that task completes) or ``WaitingGrace`` (shown while a bare pod-status report waits
for the node agent's XID, until the task that classifies and fences completes) while the
fence's create is held.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.faults.effects import ScenarioResult, conclude
from benchmarks.faults.harness import Harness, Incident, wait_for
from podmedic.workload import protocol


@dataclass(frozen=True)
class Stage:
    """Where to kill: the phases that show the stage, and how to keep the stage busy meanwhile."""

    name: str
    phases: frozenset[str]
    rule: dict[str, Any] | None = None
    job: dict[str, Any] | None = None
    tickets: bool = False  # the vendor desk holds the create answer instead
    late: bool = False  # hold only once the phase shows: a call of that kind also comes before the stage
    requested: bool = False  # in flight once the pod carries the checkpoint request and no answer (no held call)


def _held(verb: str, resource: str) -> dict[str, Any]:
    return {"verbs": [verb], "resources": [resource], "components": ["worker"], "hold": True}


STAGES = (
    Stage("detect", frozenset({"Discovering"}), _held("get", "resourceclaims")),  # discover reads the node's claims
    # The job answers slowly; the checkpoint activity waits for the answer on the pod meanwhile.
    Stage("checkpoint", frozenset({"Checkpointing"}), job={"checkpoint_answer": "slow:8"}, requested=True),
    Stage("taint", frozenset({"Opened", "WaitingGrace"}), _held("create", "devicetaintrules")),
    Stage("recover", frozenset({"Recovering"}), _held("create", "pods/eviction")),
    Stage("ticket", frozenset({"Ticketing", "AwaitingVendor"}), tickets=True),
    Stage("close", frozenset({"Untainting"}), _held("delete", "devicetaintrules")),
)
QUICK = ("checkpoint", "taint", "ticket")


def _in_flight(h: Harness, stage: Stage, incident: Incident) -> Callable[[], Awaitable[bool]]:
    """Whether the stage's call is held now (by the simulator, or the desk for a ticket), or for the
    checkpoint, whether its request is on the pod and not answered yet."""
    async def held() -> bool:
        if stage.requested:
            notes = await h.pod_annotations(incident)
            return protocol.REQUEST in notes and protocol.ACK not in notes
        return await (h.held_tickets() if stage.tickets else h.held_calls()) > 0
    return held


async def run(h: Harness, quick: bool) -> ScenarioResult:
    """Kill the worker once per stage; every incident must end with one of each effect."""
    stages = [s for s in STAGES if not quick or s.name in QUICK]
    result = ScenarioResult("worker SIGKILL", f"worker killed at: {', '.join(s.name for s in stages)}")
    since, started = time.time(), time.monotonic()
    await h.reset_ledger()
    incidents = []
    for stage in stages:
        incident = (await h.start_jobs(1, f"wk-{stage.name}", **(stage.job or {})))[0]
        incidents.append(incident)
        if stage.rule and not stage.late:
            await h.api_fault(**stage.rule)
        await h.hold_tickets(stage.tickets)
        await h.fail(incident)
        seen = await h.wait_phase(incident, set(stage.phases), 120)
        if stage.rule and stage.late:
            await h.api_fault(**stage.rule)
        await wait_for(_in_flight(h, stage, incident), 120, f"{stage.name}: the stage's call in flight",
                       interval=0.2)
        code = h.stack.kill("worker", signal.SIGKILL)
        result.faults_injected += 1
        how = "its request on the pod, unanswered" if stage.requested else "its call held"
        result.notes.append(f"{stage.name}: worker SIGKILLed in phase {seen} with {how} (exit {code})")
        await h.clear_api_faults()  # released: the simulator serves the dead worker's call; not the retries
        await h.hold_tickets(False)
        h.stack.respawn("worker")
    result = await conclude(h, result, incidents, since, timeout_s=240)
    await h.clear_api_faults()
    result.seconds = round(time.monotonic() - started, 1)
    return result
