"""Reschedule rungs: same node for Job and bare pods (by podmedic's preference, not image
locality: every node has the image and ties would go to node-0000), PDB-blocked evictions,
and any_node when the node has no free healthy device."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from podmedic.domain.incident import Phase
from podmedic.domain.models import DeviceRef
from podmedic.domain.policy import Gate
from podmedic_sim import SimCluster
from podmedic_sim.store import NotFound
from tests.e2e_recover.conftest import (
    IMAGE,
    block_node,
    delete_job,
    fault,
    incident,
    notes,
    podmedic_events,
    pods_of,
    policy,
    ready_pod,
    start_job,
    wait_progress,
)
from tests.helpers import assert_eventually
from tests.simkit import gpu_pod, gpu_template
from workflows.device.incident import DeviceIncidentWorkflow


def pod_device(pod: dict[str, Any]) -> DeviceRef:
    driver, pool, device = pod["devices"][0].split("/")
    return DeviceRef(driver=driver, pool=pool, device=device)


pytestmark = pytest.mark.asyncio(loop_scope="session")
SAME = "[{action: same_node, timeout_s: 10}]"


@pytest.fixture(autouse=True)
def clean(sim: SimCluster) -> Iterator[None]:
    """Each test starts on an empty, healthy cluster."""
    yield

    def reset() -> None:
        store = sim.store
        for kind in ("jobs", "pods", "devicetaintrules", "poddisruptionbudgets", "resourceclaimtemplates"):
            for obj in list(store.list(kind)):
                with contextlib.suppress(NotFound):
                    store.delete(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        for dev in sim.state()["devices"]:
            if dev["health"] != "Healthy":
                sim.engine.set_device_health(dev["driver"], dev["pool"], dev["device"], "Healthy")

    sim.call(reset)


async def _job_on_node1(sim: SimCluster) -> tuple[str, dict[str, Any]]:
    """A training job whose pod runs on node-0001 while node-0000 has free GPUs again."""
    blocker = await asyncio.to_thread(block_node, sim, "node-0000", 3)
    job, pod = await start_job(sim)
    assert pod["node"] == "node-0001"
    await asyncio.to_thread(delete_job, sim, blocker)
    await wait_progress(sim, job, 3)
    return job, pod


async def _past_its_creation_second(sim: SimCluster, pod: dict[str, Any]) -> None:
    stamp = sim.call(lambda: sim.store.get("pods", "default", pod["name"]))["metadata"]["creationTimestamp"]
    later = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")) + dt.timedelta(seconds=1)
    await asyncio.sleep(max(0.0, (later - dt.datetime.now(dt.UTC)).total_seconds()))


async def test_job_pod_replacement_lands_on_the_same_node(sim: SimCluster, worker: tuple[Client, str]) -> None:
    client, queue = worker
    job, pod = await _job_on_node1(sim)
    fault(sim, pod, clears_on_restart=False)
    outcome = await incident(client, queue, pod, policy(SAME))
    assert outcome.recovered_by == "same_node", notes(outcome)
    assert outcome.pod is not None and outcome.pod.uid != pod["uid"] and outcome.pod.node == "node-0001"
    assert outcome.pod.job == job and "same node" in notes(outcome)
    labels = sim.call(lambda: sim.store.get("nodes", None, "node-0001"))["metadata"].get("labels") or {}
    assert not [k for k in labels if k.startswith("prefer.podmedic.io/")], labels  # taken off afterwards


async def test_a_same_node_replacement_the_scheduler_put_elsewhere_counts_as_another_node(
    sim: SimCluster, worker: tuple[Client, str]
) -> None:
    # No prefer.podmedic.io/ affinity in the Job's template: where the replacement goes is the scheduler's
    # choice, and node-0000 has free GPUs again. Recovered, but not on the same node: said so.
    client, queue = worker
    blocker = await asyncio.to_thread(block_node, sim, "node-0000", 3)
    job, pod = await start_job(sim, prefer_node_label=False)
    assert pod["node"] == "node-0001"
    await asyncio.to_thread(delete_job, sim, blocker)
    await wait_progress(sim, job, 3)
    fault(sim, pod, clears_on_restart=False)
    outcome = await incident(client, queue, pod, policy(SAME))
    assert outcome.pod is not None and outcome.pod.node == "node-0000", notes(outcome)
    assert outcome.recovered_by == "any_node", notes(outcome)
    assert "same_node asked for node-0001; the scheduler placed" in notes(outcome), notes(outcome)


async def test_a_pod_its_job_replaced_before_podmedic_evicted_it_is_recorded_as_replaced_by_its_controller(
    sim: SimCluster, worker: tuple[Client, str]
) -> None:
    # The same_node rung waits 10 s at an approval gate (then proceeds); meanwhile someone deletes the
    # pod (kubectl delete pod) and its Job controller replaces it. podmedic evicts nothing, and the
    # recovery is the controller's, not a reschedule of podmedic's. (With 3 s, a loaded CI machine
    # sometimes saw the gate pass before the test's delete landed.) The rung waits up to 60 s for the
    # replacement: what is asserted is who replaced the pod, not how fast; with 10 s a loaded CI
    # machine twice failed it ("replacement: not Ready with Healthy devices within 10s").
    client, queue = worker
    job, pod = await _job_on_node1(sim)
    # Kubernetes stamps creationTimestamp to the second (metav1.Time, RFC 3339), and podmedic tells the pods
    # that existed with the affected one from its replacements by it: a replacement made within the affected
    # pod's first second reads as one of those. The simulator's pods step every 0.05 s, so without this wait
    # the delete below can land in that second.
    await _past_its_creation_second(sim, pod)
    fault(sim, pod, clears_on_restart=False)
    base = policy("[{action: same_node, timeout_s: 60}]")
    gated = base.model_copy(update={"approvals": base.approvals.model_copy(update={
        "gates": (Gate(action="same_node", timeout_s=10, on_timeout="proceed"),)})})
    handle = client.get_workflow_handle_for(DeviceIncidentWorkflow.run, pod_device(pod).workflow_id)
    try:
        earlier = (await handle.describe()).run_id  # an earlier test's incident of the same device
    except RPCError:
        earlier = None
    running = asyncio.create_task(incident(client, queue, pod, gated))

    async def at_the_gate() -> None:
        try:
            desc = await handle.describe()
            assert desc.run_id != earlier, "not started yet"
            state = await handle.query(DeviceIncidentWorkflow.get_state)
        except RPCError as err:  # not started yet
            raise AssertionError(str(err)) from err
        assert state.phase is Phase.AWAITING_APPROVAL, state.phase

    await assert_eventually(at_the_gate, timeout=30)
    sim.call(lambda: sim.store.delete("pods", "default", pod["name"]))
    outcome = await running
    assert outcome.recovered_by == "replaced_by_controller", _job_seen(sim, job, notes(outcome))
    assert "replaced by its Job controller (the pod was gone before podmedic evicted it)" in notes(outcome)
    assert outcome.pod is not None and outcome.pod.uid != pod["uid"] and outcome.pod.job == job
    assert "no preferred node affinity" not in notes(outcome)  # there was no pod left to place


def _job_seen(sim: SimCluster, job: str, notes_text: str) -> str:
    """The incident's notes with what the simulator holds of the Job (its status, pods and Events), so a
    failure says whether the controller made no replacement or podmedic did not see it."""
    status = sim.call(lambda: (sim.store.get("jobs", "default", job).get("status") or {}))
    events = sim.call(lambda: [e.get("message") for e in sim.store.list("events", "default")
                               if (e.get("involvedObject") or {}).get("name") == job])
    pods = [{k: p.get(k) for k in ("name", "uid", "node", "phase", "ready", "deleting", "devices")}
            for p in pods_of(sim, job)]
    return f"{notes_text}\nJob status: {status}\nJob events: {events}\nits pods: {pods}"


async def test_bare_pod_is_recreated_on_the_same_node(sim: SimCluster, worker: tuple[Client, str]) -> None:
    client, queue = worker
    blocker = await asyncio.to_thread(block_node, sim, "node-0000", 3)
    sim.call(lambda: sim.store.create("resourceclaimtemplates", gpu_template("bare-gpu")))
    sim.call(lambda: sim.store.create("pods", gpu_pod("bare", template="bare-gpu", image=IMAGE)))
    pod = await asyncio.to_thread(ready_pod, sim, lambda p: p["name"] == "bare", "the bare pod Ready")
    assert pod["node"] == "node-0001"
    await asyncio.to_thread(delete_job, sim, blocker)
    fault(sim, pod, clears_on_restart=False)
    outcome = await incident(client, queue, pod, policy(SAME))
    assert outcome.recovered_by == "same_node", notes(outcome)
    assert outcome.pod is not None and outcome.pod.name.startswith("bare-r") and outcome.pod.node == "node-0001"
    names = {p["name"] for p in sim.state()["pods"]}
    assert "bare" not in names and outcome.pod.name in names
    made = sim.call(lambda: sim.store.get("pods", "default", outcome.pod.name if outcome.pod else ""))
    assert made["metadata"]["annotations"]["podmedic.io/replaces"].startswith("bare (")
    assert made["metadata"]["annotations"]["podmedic.io/changed-by"] == outcome.incident_id
    assert not made["spec"].get("schedulingGates")


def _pdb(sim: SimCluster, job: str, min_available: int) -> None:
    sim.call(lambda: sim.store.create("poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": f"{job}-pdb",
                                                                              "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": job}}}}))


def _lift_budget_after_refusal(sim: SimCluster, job: str, pod: str, done: threading.Event) -> None:
    """Delete the job's PDB right after the pod gets its first PodmedicEvictionBlocked Event."""
    def refused() -> bool:
        return any(e.get("reason") == "PodmedicEvictionBlocked" and e.get("involvedObject", {}).get("name") == pod
                   for e in sim.store.list("events"))

    while not done.wait(0.1):
        if sim.call(refused):
            sim.call(lambda: sim.store.delete("poddisruptionbudgets", "default", f"{job}-pdb"))
            return


async def test_pdb_blocked_eviction_is_retried_until_the_budget_allows(sim: SimCluster,
                                                                      worker: tuple[Client, str]) -> None:
    client, queue = worker
    job, pod = await _job_on_node1(sim)
    _pdb(sim, job, 1)
    fault(sim, pod, clears_on_restart=False)
    # The budget is lifted once podmedic has been refused, as an operator scaling up would.
    done = threading.Event()
    lifter = threading.Thread(target=_lift_budget_after_refusal, args=(sim, job, pod["name"], done), daemon=True)
    lifter.start()
    try:
        outcome = await incident(client, queue, pod, policy(SAME, eviction="{retry_s: 0.3, max_wait_s: 20}"))
    finally:
        done.set()
        lifter.join(5)
    text = notes(outcome)
    assert outcome.recovered_by == "same_node", text
    assert "blocked (try 1)" in text and f"disruption budget {job}-pdb" in text and "allowed on try" in text, text


async def test_pdb_that_never_allows_fails_the_rung_with_the_reason(sim: SimCluster,
                                                                    worker: tuple[Client, str]) -> None:
    client, queue = worker
    job, pod = await _job_on_node1(sim)
    _pdb(sim, job, 1)
    fault(sim, pod, clears_on_restart=False)
    outcome = await incident(client, queue, pod, policy(SAME, eviction="{retry_s: 0.3, max_wait_s: 1.5}"))
    text = notes(outcome)
    assert outcome.recovered_by is None, text
    assert "eviction blocked for" in text and "would violate the pod's disruption budget" in text, text
    still = next(p for p in sim.state()["pods"] if p["name"] == pod["name"])
    assert still["uid"] == pod["uid"] and not still["deleting"]
    events = podmedic_events(sim, pod)  # the pod's Events say the attempt failed, and why
    assert "PodmedicRescheduled" not in events, events
    kind, message = events["PodmedicRescheduleFailed"]
    assert kind == "Warning" and "would violate the pod's disruption budget" in message, message


async def test_a_replacement_that_never_runs_fails_the_rung_saying_what_it_waited_for(
    sim: SimCluster, worker: tuple[Client, str]
) -> None:
    # Every GPU of both nodes taken: the Job controller's replacement stays Pending, unscheduled. The
    # rung fails, and its note says what the last look saw, not only that nothing was Ready.
    client, queue = worker
    job, pod = await _job_on_node1(sim)
    await asyncio.to_thread(block_node, sim, "node-0001", 2)
    await asyncio.to_thread(block_node, sim, "node-0000", 3)
    fault(sim, pod, clears_on_restart=False)
    outcome = await incident(client, queue, pod, policy("[{action: any_node, timeout_s: 3}]"))
    text = notes(outcome)
    assert outcome.recovered_by is None, text
    assert "replacement: not Ready with Healthy devices within 3s (last seen: " in text, text
    assert f"{job}-" in text and " on no node not Ready" in text, text


async def test_any_node_when_the_node_has_no_free_healthy_device(sim: SimCluster,
                                                                 worker: tuple[Client, str]) -> None:
    client, queue = worker
    job, pod = await _job_on_node1(sim)
    await asyncio.to_thread(block_node, sim, "node-0001", 2)  # node-0001: failed gpu + 2 taken
    fault(sim, pod, clears_on_restart=False)
    rungs = "[{action: same_node, timeout_s: 10}, {action: any_node, timeout_s: 10}]"
    outcome = await incident(client, queue, pod, policy(rungs))
    text = notes(outcome)
    assert outcome.recovered_by == "any_node", text
    assert "node node-0001 has 0 free healthy" in text, text
    assert outcome.pod is not None and outcome.pod.node == "node-0000" and outcome.pod.job == job


async def test_two_jobs_on_one_node_rescheduled_at_once_each_name_their_own_pod(
    sim: SimCluster, worker: tuple[Client, str]
) -> None:
    # Two incidents of one node reschedule two Jobs' pods at the same moment: each incident's recovery
    # names its own Job's replacement (the Job controller's pods carry batch.kubernetes.io/job-name,
    # k8s.io/api batch/v1 JobNameLabel), never the replacement the other incident is waiting for.
    client, queue = worker
    first, second = await start_job(sim), await start_job(sim)
    (job_a, pod_a), (job_b, pod_b) = first, second
    assert pod_a["node"] == pod_b["node"], (pod_a["node"], pod_b["node"])
    for pod in (pod_a, pod_b):
        fault(sim, pod, clears_on_restart=False)
    rungs = policy("[{action: any_node, timeout_s: 30}]")
    out_a, out_b = await asyncio.gather(incident(client, queue, pod_a, rungs), incident(client, queue, pod_b, rungs))
    for job, pod, outcome in ((job_a, pod_a, out_a), (job_b, pod_b, out_b)):
        assert outcome.recovered_by == "any_node" and outcome.pod is not None, notes(outcome)
        assert outcome.pod.job == job and outcome.pod.uid != pod["uid"], (job, outcome.pod, notes(outcome))
        assert outcome.pod.name.startswith(job), outcome.pod
    assert out_a.pod is not None and out_b.pod is not None and out_a.pod.uid != out_b.pod.uid
