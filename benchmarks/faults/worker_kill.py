"""Scenario (a): the worker SIGKILLed at every stage of an incident, then started again.

One incident per stage, opened one after the other while the earlier ones carry on. For
each, the suite stretches the stage's own Kubernetes call with injected latency (the
worker's calls of that kind, every incident's, until the kill), waits until the incident's
``PodmedicPhase`` shows the stage, lets the call get under way, SIGKILLs the worker and
starts a new one. The killed attempt's request may well have reached the API server (the
simulator serves it after the latency), so the new worker's retry meets the result of the
old one: that is what must not be done twice.

The fence is a local activity, run inside the incident's first workflow task, so its phase is
never published: the taint stage waits for ``Opened`` (the phase the incident starts with,
shown until that task completes) or ``WaitingGrace`` (shown while a bare pod-status report waits
for the node agent's XID, until the task that classifies and fences completes) while the
fence's create is held.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.faults.effects import ScenarioResult, conclude
from benchmarks.faults.harness import Harness


@dataclass(frozen=True)
class Stage:
    """Where to kill: the phases that show the stage, and how to keep the stage busy meanwhile."""

    name: str
    phases: frozenset[str]
    rule: dict[str, Any] | None = None
    job: dict[str, Any] | None = None


def _slow(verb: str, resource: str, ms: float = 2500) -> dict[str, Any]:
    return {"verbs": [verb], "resources": [resource], "components": ["worker"], "latency_ms": ms}


STAGES = (
    Stage("detect", frozenset({"Discovering"}), _slow("get", "resourceclaims")),  # discover reads the node's claims
    Stage("checkpoint", frozenset({"Checkpointing"}), job={"checkpoint_answer": "slow:4"}),
    Stage("taint", frozenset({"Opened", "WaitingGrace"}), _slow("create", "devicetaintrules")),
    Stage("recover", frozenset({"Recovering"}), _slow("create", "pods/eviction")),
    Stage("ticket", frozenset({"Ticketing", "AwaitingVendor"})),
    Stage("close", frozenset({"Untainting"}), _slow("delete", "devicetaintrules")),
)
QUICK = ("checkpoint", "taint", "ticket")


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
        if stage.rule:
            await h.api_fault(**stage.rule)
        await h.fail(incident)
        seen = await h.wait_phase(incident, set(stage.phases), 120)
        await asyncio.sleep(0.8)  # the stage's activity is under way (its call held by the latency)
        code = h.stack.kill("worker", signal.SIGKILL)
        result.faults_injected += 1
        result.notes.append(f"{stage.name}: worker SIGKILLed in phase {seen} (exit {code})")
        await h.clear_api_faults()  # the latency held every incident's call of this kind; not the retries
        h.stack.respawn("worker")
    result = await conclude(h, result, incidents, since, timeout_s=240)
    await h.clear_api_faults()
    result.seconds = round(time.monotonic() - started, 1)
    return result
