"""``podmedic demo``: the stack, training jobs, a realistic mix of device faults, live progress.

Faults are injected into the simulator only; everything after that is the real pipeline:
the ingest sees the pods' allocatedResourcesStatus change (Unhealthy, with no XID: the driver
sends no message), the node agent reads the XID through the simulator's NVML view, and the
worker drives each incident to a terminal, explained outcome. One fault hits a GPU that no pod
holds: only the node agent sees it, and it is quarantined before a job can land on it. One hits
a rank of a two-node JobSet: podmedic checkpoints the whole JobSet, evicts the rank, and the
placement webhook (``podmedic admission``, as in production) holds the JobSet controller's
replacement on the rank's node, on a healthy GPU.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from podmedic.domain.incident import IncidentOutcome
from podmedic.domain.node import NodeIncidentState
from podmedic.temporal.connect import connect
from workers.stack.up import Stack, StackOptions
from workflows.device.incident import DeviceIncidentWorkflow
from workflows.node.incident import NodeIncidentWorkflow

# (label, fault body without the device) — drawn from the Llama 3 interruption mix, given to the jobs in
# node order: the first node gets the three hardware faults, which make it a node incident, and the MMU
# fault, which the workload caused and which is not blamed on the node.
FAULTS: list[tuple[str, dict[str, Any]]] = [
    ("GPU fallen off the bus",
     {"code": 79, "message": "XID 79: GPU has fallen off the bus", "crash": True}),
    ("ECC error a restart does not clear",
     {"code": 94, "message": "XID 94: contained ECC error"}),
    ("HBM3 double-bit error",
     {"code": 48, "message": "XID 48: double bit ECC error", "crash": True}),
    ("MMU fault, cleared by a restart",
     {"code": 31, "message": "XID 31: GPU memory page fault", "clears_on_restart": True}),
    ("noise the policy ignores",
     {"code": 109, "message": "XID 109: context switch timeout"}),
    ("graphics exception, cleared by a restart",
     {"code": 13, "message": "XID 13: graphics engine exception", "clears_on_restart": True}),
]


# A JobSet of two ranks of 3 GPUs on nodes of 4, so the ranks run on two nodes and a rank's node has
# room for its replacement once the failed GPU is out. No preference for the node: only the webhook's
# hold brings a replacement back to it.
JOBSET_NAME, RANKS = "llm", 2
JOBSET = {"name": JOBSET_NAME, "jobset": True, "parallelism": RANKS, "devices_per_pod": 3,
          "image": f"registry.local/{JOBSET_NAME}:1", "prefer_node_label": False}
# Its process keeps running on the broken GPU (no crash), so the JobSet's own failure policy has not
# restarted it yet: podmedic gets there first, checkpoints both ranks and moves the one.
JOBSET_FAULT = ("ECC error under a JobSet rank", {"code": 94, "message": "XID 94: contained ECC error"})


def _http(url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def _ready_pods(sim_url: str, jobs: list[str], count: int, what: str) -> list[dict[str, Any]]:
    """The Ready pods of ``jobs`` once ``count`` of them are Ready with their devices (90 s at most)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pods = [p for p in _http(f"{sim_url}/sim/v1/state")["pods"]
                if p.get("job") in jobs and p.get("ready") and not p.get("deleting")]
        if len(pods) == count:
            return sorted(pods, key=lambda p: str(p["job"]))
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not become Ready within 90s")


def _start_jobset(sim_url: str) -> list[dict[str, Any]]:
    """The two-node JobSet; its rank pods once Ready."""
    _http(f"{sim_url}/sim/v1/workloads/training", JOBSET)
    ranks = _ready_pods(sim_url, [f"{JOBSET_NAME}-node-{i}" for i in range(RANKS)], RANKS, f"JobSet {JOBSET_NAME}")
    print(f"  JobSet {JOBSET_NAME} running: {RANKS} ranks of 3 GPUs on {', '.join(str(r['node']) for r in ranks)}",
          flush=True)
    return ranks


def _start_jobs(sim_url: str, count: int) -> list[dict[str, Any]]:
    """One single-GPU training job per fault, each with its own image; wait until Ready."""
    names = [f"train-{i:02d}" for i in range(count)]
    for name in names:
        _http(f"{sim_url}/sim/v1/workloads/training", {"name": name, "image": f"registry.local/{name}:1"})
    pods = _ready_pods(sim_url, names, count, f"{count} training jobs")
    print(f"  {count} training jobs running", flush=True)
    return pods


def _replaced(sim_url: str, rank: dict[str, Any]) -> dict[str, Any]:
    """The Ready pod that took ``rank``'s place in its Job (120 s at most: podmedic's recovery in between)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for pod in _http(f"{sim_url}/sim/v1/state")["pods"]:
            if pod.get("job") == rank["job"] and pod["uid"] != rank["uid"] and pod.get("ready") \
                    and not pod.get("deleting"):
                return dict(pod)
        time.sleep(0.5)
    raise RuntimeError(f"{rank['name']} was not replaced within 120s")


def _free_gpus(sim_url: str) -> dict[str, list[str]]:
    """Each node's GPUs that are healthy and held by no pod."""
    free: dict[str, list[str]] = {}
    for d in _http(f"{sim_url}/sim/v1/state")["devices"]:
        if d["driver"] == "gpu.nvidia.com" and not d["allocated_to"] and d["health"] == "Healthy":
            free.setdefault(str(d["pool"]), []).append(f"{d['driver']}/{d['pool']}/{d['device']}")
    return free


def _rank_to_fail(ranks: list[dict[str, Any]], free: dict[str, list[str]]) -> dict[str, Any]:
    """The rank whose node keeps a free GPU for its replacement, rank 0 first: after the JobSet restarts,
    rank 0's pod is created and scheduled first, so the other rank cannot take its node's GPUs."""
    return next((r for r in ranks if free.get(str(r["node"]))), ranks[0])


def _idle_device(free: dict[str, list[str]], keep: str) -> str:
    """A GPU no pod holds (pod status will never mention it), not on node ``keep``."""
    idle = [rid for node, rids in sorted(free.items()) if node != keep for rid in rids]
    if not idle:
        raise RuntimeError("no idle GPU left in the demo cluster")
    return idle[-1]


def _inject(sim_url: str, rid: str, fault: dict[str, Any]) -> None:
    driver, pool, device = rid.split("/")
    _http(f"{sim_url}/sim/v1/faults/device", {"driver": driver, "pool": pool, "device": device,
                                              "health": "Unhealthy", "reason": "XidError", **fault})


async def _watch(client: Client, devices: list[str], timeout_s: float) -> dict[str, IncidentOutcome | None]:
    """Print phase changes until every device's incident has closed."""
    outcomes: dict[str, IncidentOutcome | None] = {d: None for d in devices}
    phases: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(v is None for v in outcomes.values()):
        for rid in devices:
            if outcomes[rid] is not None:
                continue
            handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, f"device/{rid}")
            try:
                desc = await handle.describe()
                state = await handle.query(DeviceIncidentWorkflow.get_state)
            except Exception:
                continue
            if state.phase.value != phases.get(rid):
                phases[rid] = state.phase.value
                print(f"  {time.strftime('%H:%M:%S')}  {rid:<36} {state.phase.value:<15} "
                      f"{state.timeline[-1].message[:80] if state.timeline else ''}", flush=True)
            if desc.status != WorkflowExecutionStatus.RUNNING:
                outcomes[rid] = await handle.result()
        await asyncio.sleep(0.5)
    return outcomes


def _blame(out: IncidentOutcome | None) -> str:
    """Whom the fault is blamed on: the workload (counts toward no node incident or lemon) or the hardware."""
    if out is None or out.failure_mode is None:
        return "-"
    return "workload" if out.failure_mode.blames_the_workload else "hardware"


RECOVERY_WORDS = {"in_place_restart": "restarted in place", "same_node": "rescheduled by podmedic to the same node",
                  "any_node": "rescheduled by podmedic to another node",
                  "replaced_by_controller": "replaced by its own controller"}


def _recovery(out: IncidentOutcome | None) -> str:
    """How the workload recovered, in words, where it runs now, and whether a hold kept it there."""
    if out is None or out.recovered_by is None:
        return "none verified"
    where = f" ({out.pod.namespace}/{out.pod.name} on {out.pod.node})" if out.pod is not None else ""
    held = any(e.step == "recover" and "replacement held on" in e.message for e in out.timeline)
    return RECOVERY_WORDS.get(out.recovered_by, out.recovered_by) + where + (
        ", held there by the placement webhook" if held else "")


async def _node_incidents(client: Client) -> list[NodeIncidentState]:
    """Every node watch the incidents opened, as it stands now."""
    states = []
    async for wf in client.list_workflows("WorkflowType = 'NodeIncident'"):
        handle = client.get_workflow_handle_for(NodeIncidentWorkflow.run, wf.id)
        try:
            states.append(await handle.query(NodeIncidentWorkflow.get_state))
        except Exception as exc:  # a watch that cannot be read is shown, not fatal to the demo
            print(f"  (node watch {wf.id} unreadable: {exc})")
    return sorted(states, key=lambda s: s.node)


def run_demo(*, faults: int, summary_json: Path | None, keep: bool, state_dir: Path) -> int:
    """Run the demo; 0 when every incident reached a terminal state."""
    if state_dir.exists():
        shutil.rmtree(state_dir)
    state_dir.mkdir(parents=True)
    policy = state_dir / "policy.yaml"
    policy.write_text(resources.files("workers.stack").joinpath("demo_policy.yaml").read_text())
    print(f"podmedic demo: starting Temporal, the simulator, the worker and ingest under {state_dir}", flush=True)
    with Stack(StackOptions(state_dir=state_dir, policy=policy, nodes=4, devices_per_node=4,
                            vendor_resolve_s=5.0)) as stack:
        ep = stack.endpoints
        sim_url = str(ep["sim_url"])
        print(f"  Temporal UI: {ep['ui_url']}", flush=True)
        pods = sorted(_start_jobs(sim_url, faults), key=lambda p: (p["node"], p["devices"][0]))
        ranks = _start_jobset(sim_url)
        devices: list[str] = []
        # The JobSet's fault first, on its own: the single jobs' faults that follow move pods onto free GPUs,
        # and would take the rank's spare before its replacement is back.
        free = _free_gpus(sim_url)
        rank = _rank_to_fail(ranks, free)
        rid = rank["devices"][0]
        print(f"  inject on {rid} ({rank['name']}, a rank of JobSet {JOBSET_NAME} on {rank['node']}): "
              f"{JOBSET_FAULT[0]}", flush=True)
        _inject(sim_url, rid, JOBSET_FAULT[1])
        devices.append(rid)
        back = _replaced(sim_url, rank)
        print(f"  JobSet {JOBSET_NAME}: {rank['name']} replaced by {back['name']} on {back['node']}", flush=True)
        for i, pod in enumerate(pods):
            label, fault = FAULTS[i % len(FAULTS)]
            rid = pod["devices"][0]
            print(f"  inject on {rid} ({pod['name']}): {label}", flush=True)
            _inject(sim_url, rid, fault)
            devices.append(rid)
            time.sleep(0.5)
        idle = _idle_device(free, keep=str(rank["node"]))
        print(f"  inject on {idle} (idle, no pod holds it): GPU fallen off the bus; only the node agent sees it",
              flush=True)
        _inject(sim_url, idle, FAULTS[0][1])
        devices.append(idle)
        client = asyncio.run(connect(str(ep["temporal_address"])))
        outcomes = asyncio.run(_watch(client, devices, timeout_s=300))
        rows = []
        print("\nIncidents:")
        print(f"  {'device':<36} {'failure mode':<15} {'blame':<9} {'outcome':<21} steps")
        for rid, out in outcomes.items():
            mode = out.failure_mode.value if out and out.failure_mode else "-"
            blame = _blame(out)
            result = out.outcome.value if out else "NOT FINISHED"
            print(f"  {rid:<36} {mode:<15} {blame:<9} {result:<21} {' > '.join(out.steps) if out else ''}")
            if out:
                print(f"  {'':<36} {out.explanation}")
                print(f"  {'':<36} recovery: {_recovery(out)}")
            rows.append({"id": f"device/{rid}", "device": rid, "failure_mode": mode, "blame": blame, "outcome": result,
                         "recovery": _recovery(out), "steps": out.steps if out else [],
                         "explanation": out.explanation if out else ""})
        nodes = asyncio.run(_node_incidents(client))
        if nodes:
            print("\nNode watches (several devices of one node failing together):")
            for node in nodes:
                print(f"  {node.node:<12} {node.phase:<13} {', '.join(node.devices) or '-'}")
        if summary_json:
            summary_json.write_text(json.dumps({"incidents": rows, "nodes": [n.model_dump(mode="json") for n in nodes]},
                                               indent=2))
        print(f"\nTemporal UI: {ep['ui_url']}  (search: WorkflowType='DeviceIncident')")
        done = all(v is not None for v in outcomes.values())
        if keep:
            stack.wait_forever()
        return 0 if done else 1
