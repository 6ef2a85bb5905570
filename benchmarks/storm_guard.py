"""``python -m benchmarks storm-guard``: a storm under the fleet guard as it ships.

Every device of NODES nodes fails at once with a permanent fault (XID 48, a double-bit ECC error:
the policy's taint for it is ``NoExecute``, which evicts) while the training processes still run, so
that only podmedic's NoExecute rules move pods. (A first try with XID 79 killing every process at once
left 1,000 Jobs re-creating pods on a fleet without a healthy GPU; the simulator's answers timed out,
981 discovery attempts failed, and the run ended on a timeout of its own: a different benchmark.) The
embedded default policy's ``guard:`` section is left as it ships (the other storm benchmarks turn the
guard off to measure the pipeline).
Two figures, each against the issue's target:

- **Trip latency**: from the moment the storm threshold was crossed to the start of the fleet
  incident (``fleet/storm/<time>``). The threshold is worked out here from the shipped numbers and the
  fleet the simulator serves, not read from the guard: the ``k``-th device failure within
  ``storm.window_s``, ``k`` the least count that is both ``storm.share`` of the driver's devices and at
  least ``storm.min_devices``. The warm-up incident's device counts when it failed within the window
  (its incident asked the guard like any other).
- **NoExecute at once**: the DeviceTaintRules with effect ``NoExecute``, listed from the simulator's
  API server every ``SAMPLE_S`` through the storm, while the guard stays tripped, and after
  ``podmedic guard resume`` lets the held incidents go on. The limit is ``guard.max_devices_tainted``.

The run ends ``--observe-s`` after the resume; incidents still running then are left (a permanent fault
waits for its repair, which no one here makes).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from benchmarks.fleet import DRIVER, Fault, Sim, deliverer, fire
from benchmarks.orchestration import prepared
from benchmarks.results import write
from benchmarks.settings import SERVERS, STORM_POLLS, shipped_guard_policy, stack_config, storm_timings
from benchmarks.stack import running_stack
from benchmarks.stats import load_1m, machine
from podmedic.domain.fleet_guard.messages import GUARD_WORKFLOW_ID, GuardStatus, ResumeRequest
from podmedic.domain.fleet_guard.policy import GuardPolicy

TARGET_TRIP_S = 10.0  # the target: the fleet incident opens within 10 s of crossing the storm threshold
SAMPLE_S = 0.5
PERMANENT = Fault(code=48, message="XID 48: double-bit ECC error (benchmark)", clears_on_restart=False)
RULES = "/apis/resource.k8s.io/v1/devicetaintrules"  # the simulator's default version (podmedic_sim/config.py)


@dataclass
class NoExecuteCount:
    """The NoExecute DeviceTaintRules seen at once, per stage of the run."""

    stage: str = "storm"
    most: dict[str, int] = field(default_factory=dict)
    samples: int = 0

    def add(self, count: int) -> None:
        self.most[self.stage] = max(self.most.get(self.stage, 0), count)
        self.samples += 1


async def no_execute_rules(sim: Sim) -> int:
    """How many DeviceTaintRules evict now (``spec.taint.effect``, KEP-5055's DeviceTaintRule)."""
    async with sim.session.get(f"{sim.url}{RULES}") as answer:
        if answer.status != 200:
            raise RuntimeError(f"list devicetaintrules: {answer.status} {await answer.text()}")
        items = (await answer.json())["items"]
    return sum(1 for rule in items if rule["spec"]["taint"]["effect"] == "NoExecute")


async def sample(sim: Sim, count: NoExecuteCount) -> None:
    """Count NoExecute rules every ``SAMPLE_S`` until cancelled."""
    while True:
        count.add(await no_execute_rules(sim))
        await asyncio.sleep(SAMPLE_S)


def threshold(policy: GuardPolicy, fleet: int) -> int:
    """The least number of a driver's devices, failed within the window, that is a storm."""
    return max(math.ceil(policy.storm.share * fleet - 1e-9), policy.storm.min_devices)


def crossed_at(failures: list[float], needed: int, window_s: float) -> float | None:
    """When ``needed`` failures first fell within ``window_s`` of each other; None if never."""
    ordered = sorted(failures)
    for i in range(needed - 1, len(ordered)):
        if ordered[i] - ordered[i - needed + 1] <= window_s:
            return ordered[i]
    return None


async def fleet_incident(client: Client, timeout_s: float) -> tuple[str, float] | None:
    """The first fleet incident's id and start time, waiting up to ``timeout_s`` for one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        async for wf in client.list_workflows('WorkflowType = "FleetIncident"'):
            return wf.id, wf.start_time.timestamp()
        await asyncio.sleep(0.5)
    return None


async def started_at(client: Client, query: str) -> list[float]:
    """Start times of the workflows ``query`` lists."""
    return [wf.start_time.timestamp() async for wf in client.list_workflows(query)]


async def guard_history(client: Client) -> dict[str, int]:
    """The guard's runs so far (continue-as-new starts another) and its current run's history: what
    its asks and the ingest's sightings cost it."""
    runs = [wf async for wf in client.list_workflows(f'WorkflowId = "{GUARD_WORKFLOW_ID}"')]
    events = [e async for e in client.get_workflow_handle(GUARD_WORKFLOW_ID).fetch_history_events()]
    signals = [e.workflow_execution_signaled_event_attributes.signal_name for e in events
               if e.HasField("workflow_execution_signaled_event_attributes")]
    return {"guard_runs": len(runs), "guard_history_events": len(events),
            "guard_sighted_signals": signals.count("sighted")}


async def guard_status(client: Client) -> GuardStatus:
    """The fleet guard's ``status`` query (what ``podmedic guard status`` prints)."""
    status: GuardStatus = await client.get_workflow_handle(GUARD_WORKFLOW_ID).query("status", result_type=GuardStatus)
    return status


async def run_storm_guard(nodes: int, devices_per_node: int, server: str, progress: Any = print, *,
                          observe_s: float = 120.0) -> dict[str, Any]:
    """Fail every device at once under the shipped guard; returns the figures."""
    devices = nodes * devices_per_node
    config = stack_config(server, nodes + 1, timings=storm_timings(devices))
    policy = shipped_guard_policy(**STORM_POLLS, detection={"storm_fence": {"enabled": True}})
    guard = policy.for_driver(DRIVER).guard
    assert guard is not None and guard.enabled, "the embedded default policy ships with the fleet guard on"
    fleet = (nodes + 1) * config.devices_per_node  # every simulated node's ResourceSlice, the warm-up's included
    needed = threshold(guard, fleet)
    async with running_stack(config) as stack, Sim(stack.sim_url) as sim:
        pods, _ = await prepared(stack, sim, devices, "guard", policy)
        warm_ups = await started_at(stack.client, 'WorkflowType = "DeviceIncident"')
        progress(f"[storm-guard] {len(pods)} training pods Ready; a storm is {needed} of {fleet} devices "
                 f"within {guard.storm.window_s:g} s")
        count = NoExecuteCount()
        sampler = asyncio.create_task(sample(sim, count))
        try:
            delivery = deliverer(stack.client, policy, stack.task_queue)
            timings = await fire(sim, delivery, pods, PERMANENT)
            sends = [t.sent for t in timings]
            progress(f"[storm-guard] {len(sends)} events sent over {max(sends) - min(sends):.1f} s")
            found = await fleet_incident(stack.client, observe_s)
            count.stage = "tripped"
            await asyncio.sleep(observe_s)
            tripped = await guard_status(stack.client)
            guard_book = await guard_history(stack.client)
            throttled = (await stack.client.count_workflows(
                'WorkflowType = "DeviceIncident" AND PodmedicPhase = "Throttled"')).count
            resumed = tripped
            if found is not None:  # `resume` is refused by a guard that never tripped
                count.stage = "resumed"
                await stack.client.get_workflow_handle(GUARD_WORKFLOW_ID).execute_update(
                    "resume", ResumeRequest(by="benchmark", reason="storm-guard: the trip was measured"),
                    result_type=GuardStatus)
                progress(f"[storm-guard] guard resumed; watching {observe_s:g} s more")
                await asyncio.sleep(observe_s)
                resumed = await guard_status(stack.client)
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
    crossing = crossed_at(warm_ups + sends, needed, guard.storm.window_s)
    trip_s = None if found is None or crossing is None else round(found[1] - crossing, 2)
    return {"benchmark": "storm-guard", "machine": machine(), "nodes": nodes, "devices": devices, "server": server,
            "server_flags": SERVERS[server], "fault": f"XID {PERMANENT.code} (permanent: NoExecute)",
            "guard": guard.model_dump(mode="json"), "fleet_devices": fleet, "guard_fleet": tripped.fleet and
            tripped.fleet.drivers, "storm_threshold_devices": needed, "send_s": round(max(sends) - min(sends), 2),
            "fleet_incident": found[0] if found else None,
            "tripped_summary": tripped.storm.summary if tripped.storm else None,
            "trip_s_after_threshold": trip_s, "target_trip_s": TARGET_TRIP_S,
            "no_execute_most": count.most, "no_execute_limit": guard.max_devices_tainted,
            "no_execute_samples": count.samples, "sample_s": SAMPLE_S, "observe_s": observe_s,
            "throttled_while_tripped": throttled, "resumed": found is not None,
            "permits_after_resume": resumed.devices_tainted, "waiting_after_resume": len(resumed.waiting),
            "sighting_round_trips": delivery.sightings.told,
            "sighting_round_trips_failed": delivery.sightings.failed, **guard_book,
            "load_1m": load_1m()}


def storm_guard_table(r: dict[str, Any]) -> str:
    """The figures as plain text, with the verdicts."""
    trip, most, limit = r["trip_s_after_threshold"], r["no_execute_most"], r["no_execute_limit"]
    trip_ok = trip is not None and trip <= r["target_trip_s"]
    peak = max(most.values(), default=0)
    return "\n".join([
        f"storm-guard: {r['devices']} devices on {r['nodes']} nodes fail at once, {r['fault']}, the shipped fleet "
        f"guard ({r['server']} server; events sent over {r['send_s']} s)",
        f"  storm threshold: {r['storm_threshold_devices']} of {r['fleet_devices']} devices "
        f"(the guard counted a fleet of {r['guard_fleet']})",
        f"  fleet incident {r['fleet_incident']}: {r['tripped_summary']}",
        f"  fleet incident opened {trip} s after the threshold was crossed; target <= {r['target_trip_s']:g} s: "
        f"{'met' if trip_ok else 'MISSED'}",
        f"  NoExecute DeviceTaintRules at once, most seen (every {r['sample_s']:g} s, {r['no_execute_samples']} "
        f"samples): " + ", ".join(f"{stage} {n}" for stage, n in most.items()) +
        f"; limit {limit}: {'met' if peak <= limit else 'MISSED'}",
        f"  the ingest's sightings: {r.get('sighting_round_trips')} round trips "
        f"({r.get('sighting_round_trips_failed')} failed); the guard: {r.get('guard_runs')} run(s), "
        f"{r.get('guard_history_events')} events in the current one ({r.get('guard_sighted_signals')} sightings)",
        f"  {r['throttled_while_tripped']} incidents Throttled {r['observe_s']:g} s into the trip; "
        + (f"{r['observe_s']:g} s after the resume: " if r.get("resumed", True) else "never tripped, not resumed: ")
        + f"{r['permits_after_resume']} permits held, {r['waiting_after_resume']} waiting; 1-min load {r['load_1m']}",
    ])


def run_and_print(nodes: int, devices_per_node: int, server: str, out: Path, *, observe_s: float) -> dict[str, Any]:
    """The command's body."""
    results = asyncio.run(run_storm_guard(nodes, devices_per_node, server, observe_s=observe_s))
    print(storm_guard_table(results))
    write(results, out)
    return results
