"""Announced maintenance end to end: the ingest reads the node label, the incident waits for the latest safe
moment, then checkpoints and moves the pod before the deadline, and uncordons the node once it is back.

Real parts: the simulator over HTTP, the ingest's cluster sources as ``podmedic ingest`` runs them (under
deploy/'s RBAC), the Temporal dev server and the real worker. The notice is GKE's: the node label
``cloud.google.com/scheduled-maintenance-time``, the start time in Unix seconds ("Monitor maintenance
events", GKE docs), written here with kubectl as an operator or GKE would; at the deadline the node is taken
down as a terminated VM is (the simulator's node lifecycle: podmedic_sim/node_lifecycle.py cites
pkg/controller/nodelifecycle), then brought back with the label gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from podmedic.domain.maintenance import GKE_LABEL, MAINTENANCE_TAINT, MaintenanceOutcome
from podmedic.domain.policy_file import parse_policy
from podmedic_sim import SimCluster
from tests.e2e_ingest.conftest import SourceSet
from tests.helpers import assert_eventually, clear_workloads, run_kubectl, training_leaderworkerset, wait_until
from workers.ingest.delivery import Deliverer
from workers.ingest.http.app import build_app, start_site
from workers.ingest.http.cloudevents import MAINTENANCE_TYPE
from workers.ingest.settings import HttpSettings, IngestSettings
from workflows.node.maintenance import NodeMaintenanceWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
NOTICE_S = 24.0  # the deadline, from the notice
SAVE_S = 3.0  # the policy's checkpoint.timeout_s: the save time of a pod that declares none
LEAD_S = 8.0


@pytest.fixture(autouse=True)
def clean(ingest_sim: SimCluster) -> Iterator[None]:
    """Each test starts with every GPU free: a workload left running would hold the room the next one's
    move needs."""
    yield
    clear_workloads(ingest_sim)


def _policy(enabled: bool) -> Any:
    return parse_policy(f"""
drivers:
  default:
    checkpoint: {{timeout_s: {SAVE_S}, poll_s: 0.1}}
    recovery: {{verify_poll_s: 0.2}}
    maintenance: {{enabled: {str(enabled).lower()}, lead_s: {LEAD_S}, poll_s: 0.5, back_s: 60}}
""")


def _kubectl(sim: SimCluster, *args: str) -> str:
    assert sim.kubeconfig_path is not None
    done = run_kubectl(sim.kubeconfig_path, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _job(sim: SimCluster, name: str) -> dict[str, Any]:
    return next(j for j in sim.state()["jobs"] if j["name"] == name)


def _running(sim: SimCluster, name: str) -> list[dict[str, Any]]:
    return [p for p in sim.state()["pods"] if p["job"] == name and p["ready"] and not p["deleting"]]


def _node(sim: SimCluster, node: str) -> dict[str, Any]:
    found: dict[str, Any] = sim.call(lambda: sim.store.find("nodes", None, node))
    return found


async def _announced(sim: SimCluster, source_sets: Callable[..., SourceSet],
                     enabled: bool) -> tuple[str, dict[str, Any], dt.datetime]:
    """A one-pod training Job stepping, the ingest watching, and its node's maintenance announced
    ``NOTICE_S`` from now; the Job's name, its pod and the deadline."""
    name = f"train-{uuid.uuid4().hex[:5]}"
    sim.call(lambda: sim.engine.create_training_job(name, prefer_node_label=False))
    pod = wait_until(lambda: (r[0] if (r := _running(sim, name)) else None), timeout=30, what="the pod Ready")
    wait_until(lambda: _job(sim, name)["step"] >= 3 or None, timeout=30, what="steps")
    await source_sets(_policy(enabled)).watching()
    deadline = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=NOTICE_S)
    _kubectl(sim, "label", "node", pod["node"], f"{GKE_LABEL}={int(deadline.timestamp())}")
    return name, pod, deadline


def _maintain(sim: SimCluster, node: str, deadline: dt.datetime) -> None:
    """At the deadline the node goes down (its VM terminated); it comes back with the label gone."""
    wait_until(lambda: dt.datetime.now(dt.UTC) >= deadline or None, timeout=NOTICE_S + 5, what="the deadline")
    sim.call(lambda: sim.engine.nodes.set_down(node, True))
    time.sleep(2.0)
    _kubectl(sim, "label", "node", node, f"{GKE_LABEL}-")
    sim.call(lambda: sim.engine.nodes.set_down(node, False))


async def test_the_pod_trains_on_to_the_latest_safe_moment_then_moves_before_the_deadline(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet]) -> None:
    client, _ = ingest_worker
    name, pod, deadline = await _announced(ingest_sim, source_sets, enabled=True)
    node = pod["node"]
    handle = client.get_workflow_handle_for(NodeMaintenanceWorkflow.run, f"maintenance/{node}")

    async def opened() -> list[str]:
        try:
            lines = await handle.query(NodeMaintenanceWorkflow.get_timeline)
        except RPCError as err:
            raise AssertionError(f"no maintenance incident yet: {err}") from err
        assert any("acting at" in line for line in lines), lines
        return lines

    lines = await assert_eventually(opened, timeout=15)
    act = deadline - dt.timedelta(seconds=SAVE_S + LEAD_S)
    assert f"acting at {act:%H:%M:%S}" in "\n".join(lines), lines
    # Until that moment nothing is touched: the pod trains on, the node takes work.
    await asyncio.sleep(max(0.0, (act - dt.datetime.now(dt.UTC)).total_seconds() - 2))
    same = [p for p in _running(ingest_sim, name) if p["uid"] == pod["uid"]]
    assert same and same[0]["node"] == node, _running(ingest_sim, name)
    assert _job(ingest_sim, name)["requested_step"] == -1
    assert not _node(ingest_sim, node)["spec"].get("unschedulable")

    # Then: checkpointed, cordoned, moved to the other node, before the deadline.
    moved = await asyncio.to_thread(wait_until, lambda: next(
        (p for p in _running(ingest_sim, name) if p["uid"] != pod["uid"]), None), timeout=NOTICE_S, what="moved")
    assert dt.datetime.now(dt.UTC) < deadline, "moved only after the deadline"
    assert moved["node"] != node, moved
    # Rolled back to the checkpoint podmedic asked for at that moment, not to the job's own last one.
    last = _job(ingest_sim, name)["interruptions"][-1]
    assert last["checkpointed_step"] >= last["requested_step"] >= 3, last
    taints = _node(ingest_sim, node)["spec"].get("taints") or []
    assert _node(ingest_sim, node)["spec"].get("unschedulable") and \
        any(t["key"] == MAINTENANCE_TAINT for t in taints), taints

    await asyncio.to_thread(_maintain, ingest_sim, node, deadline)
    outcome: MaintenanceOutcome = await asyncio.wait_for(handle.result(), timeout=60)
    assert outcome.outcome == "moved", outcome
    assert outcome.moved and f"on {moved['node']}" in outcome.moved[0], outcome.moved
    assert not _node(ingest_sim, node)["spec"].get("unschedulable")
    assert not [t for t in _node(ingest_sim, node)["spec"].get("taints") or [] if t["key"] == MAINTENANCE_TAINT]
    assert [p for p in _running(ingest_sim, name) if p["uid"] == moved["uid"]], "the moved pod kept running"


async def test_with_the_mechanism_off_the_pod_goes_down_with_its_node(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet]) -> None:
    """``maintenance.enabled: false``: no incident opens, the pod stays on the node until the deadline and
    loses the steps since its own last checkpoint with it."""
    client, _ = ingest_worker
    began = dt.datetime.now(dt.UTC)
    name, pod, deadline = await _announced(ingest_sim, source_sets, enabled=False)
    await asyncio.to_thread(_maintain, ingest_sim, pod["node"], deadline)
    try:  # the first test's incident of the same node may be on record: none opened since this test began
        described = await client.get_workflow_handle(f"maintenance/{pod['node']}").describe()
        assert described.start_time < began, described.start_time
    except RPCError:
        pass
    job = _job(ingest_sim, name)
    assert job["requested_step"] == -1, job
    await asyncio.to_thread(wait_until, lambda: _job(ingest_sim, name)["interruptions"] or None, timeout=30,
                            what="the pod lost with its node")



async def _moved_off(sim: SimCluster, source_sets: Callable[..., SourceSet], pods: Callable[[], list[dict[str, Any]]],
                    what: str) -> tuple[str, dt.datetime, list[dict[str, Any]]]:
    """``pods`` (two, of one workload) Ready, the ingest watching, maintenance announced on the first one's node
    ``NOTICE_S`` ahead; once every pod is new and off the node, before the deadline: the node, the deadline and
    the pods."""
    first = wait_until(lambda: (r if len(r := pods()) == 2 else None), timeout=30, what=f"{what} Ready")
    node = first[0]["node"]
    await source_sets(_policy(True)).watching()
    deadline = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=NOTICE_S)
    _kubectl(sim, "label", "node", node, f"{GKE_LABEL}={int(deadline.timestamp())}")

    def moved() -> list[dict[str, Any]] | None:
        now = pods()
        fresh = len(now) == 2 and not {p["uid"] for p in now} & {p["uid"] for p in first}
        return now if fresh and node not in {p["node"] for p in now} else None

    again = await asyncio.to_thread(wait_until, moved, timeout=NOTICE_S, what=f"{what} running off the node")
    assert dt.datetime.now(dt.UTC) < deadline, "moved only after the deadline"
    return node, deadline, again


async def _closed_moved(client: Client, sim: SimCluster, node: str, deadline: dt.datetime) -> None:
    """The node goes down at the deadline and comes back; its incident closes ``moved``."""
    await asyncio.to_thread(_maintain, sim, node, deadline)
    handle = client.get_workflow_handle_for(NodeMaintenanceWorkflow.run, f"maintenance/{node}")
    outcome: MaintenanceOutcome = await asyncio.wait_for(handle.result(), timeout=60)
    assert outcome.outcome == "moved", outcome


async def test_a_leaderworkerset_group_leaves_the_node_before_the_deadline(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet]) -> None:
    """A LeaderWorkerSet group (leader and one worker, a GPU each): the ranks on the announced node are
    checkpointed and moved at the latest safe moment; the group's controller recreates it
    (RecreateGroupOnPodRestart, the LeaderWorkerSet default, podmedic_sim/leaderworkersets.py) and it runs whole
    off the node before the deadline."""
    client, _ = ingest_worker
    name = f"lws-{uuid.uuid4().hex[:5]}"
    training_leaderworkerset(ingest_sim, name, size=2)

    def group() -> list[dict[str, Any]]:
        return [p for p in ingest_sim.state()["pods"] if p["name"] in (f"{name}-0", f"{name}-0-1")
                and p["ready"] and p["devices"] and not p["deleting"]]

    node, deadline, again = await _moved_off(ingest_sim, source_sets, group, "the group")
    await _closed_moved(client, ingest_sim, node, deadline)
    assert [p["uid"] for p in group()] and {p["node"] for p in group()} == {p["node"] for p in again}, group()


async def test_a_jobset_leaves_the_node_before_the_deadline_from_the_checkpoint_asked_then(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], source_sets: Callable[..., SourceSet]) -> None:
    """A JobSet of two one-pod Jobs, one synchronous job (podmedic_sim/training_groups.py): the ranks on the
    announced node are checkpointed at the latest safe moment and moved; the JobSet's failure policy
    (maxRestarts: a failed Job recreates every Job, kubernetes-sigs/jobset) brings the whole job back off the
    node, before the deadline, from the checkpoint podmedic asked for then."""
    client, _ = ingest_worker
    name = f"js-{uuid.uuid4().hex[:5]}"
    ingest_sim.call(lambda: ingest_sim.engine.create_training_job(name, parallelism=2, jobset=True,
                                                                  prefer_node_label=False))

    def ranks() -> list[dict[str, Any]]:
        return [p for p in ingest_sim.state()["pods"] if p.get("jobset") == name and p["ready"] and not p["deleting"]]

    wait_until(lambda: len(ranks()) == 2 or None, timeout=30, what="both ranks Ready")
    wait_until(lambda: _job(ingest_sim, name)["step"] >= 3 or None, timeout=30, what="steps")
    node, deadline, again = await _moved_off(ingest_sim, source_sets, ranks, "the JobSet")
    last = _job(ingest_sim, name)["interruptions"][-1]
    assert last["checkpointed_step"] >= last["requested_step"] >= 3, last
    await _closed_moved(client, ingest_sim, node, deadline)
    assert {p["uid"] for p in ranks()} == {p["uid"] for p in again}, "the moved ranks kept running"


@contextlib.asynccontextmanager
async def _front(ingest_worker: tuple[Client, str], directory: Path) -> AsyncIterator[Callable[..., Any]]:
    """The ingest's HTTP front on a real port, delivering with the maintenance policy; yields ``post(path,
    body, content_type)`` -> (status, answer)."""
    client, task_queue = ingest_worker
    (directory / "token").write_text("t")
    settings = IngestSettings(http=HttpSettings(port=0, token_file=directory / "token"))
    runner, url = await start_site(build_app(Deliverer(client, _policy(True), task_queue), settings), settings.http)
    try:
        async with aiohttp.ClientSession() as http:
            async def post(path: str, body: object, content_type: str) -> tuple[int, Any]:
                async with http.post(url + path, data=json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer t", "Content-Type": content_type}) as r:
                    return r.status, await r.json()
            yield post
    finally:
        await runner.cleanup()


def _maintenance_event(node: str, deadline: dt.datetime | None, i: str) -> dict[str, Any]:
    """podmedic's maintenance CloudEvent (docs/detection.md), as a bridge from a cloud's notice sends it."""
    return {"specversion": "1.0", "id": i, "source": "e2e/scheduled-events", "type": MAINTENANCE_TYPE,
            "data": {"node": node, "deadline": deadline.isoformat() if deadline else None}}


async def test_a_cloudevent_deadline_moves_the_pod_before_it(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], tmp_path: Path) -> None:
    """The same mechanism, told by a CloudEvent instead of GKE's label: the pod trains on, then moves off the
    node before the deadline; the node goes down at it, comes back, and is uncordoned."""
    client, _ = ingest_worker
    name = f"train-{uuid.uuid4().hex[:5]}"
    ingest_sim.call(lambda: ingest_sim.engine.create_training_job(name, prefer_node_label=False))
    pod = wait_until(lambda: (r[0] if (r := _running(ingest_sim, name)) else None), timeout=30, what="the pod Ready")
    node, deadline = pod["node"], dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=NOTICE_S)
    async with _front(ingest_worker, tmp_path) as post:
        status, answer = await post("/v1/events", _maintenance_event(node, deadline, "1"),
                                    "application/cloudevents+json")
        assert status == 202 and answer["incidents"] == [f"maintenance/{node}"], answer
    moved = await asyncio.to_thread(wait_until, lambda: next(
        (p for p in _running(ingest_sim, name) if p["uid"] != pod["uid"]), None), timeout=NOTICE_S, what="moved")
    assert dt.datetime.now(dt.UTC) < deadline and moved["node"] != node, moved
    await asyncio.to_thread(_maintain, ingest_sim, node, deadline)
    handle = client.get_workflow_handle_for(NodeMaintenanceWorkflow.run, f"maintenance/{node}")
    outcome: MaintenanceOutcome = await asyncio.wait_for(handle.result(), timeout=60)
    assert outcome.outcome == "moved", outcome
    assert any("CloudEvent from e2e/scheduled-events" in line for line in outcome.timeline), outcome.timeline


async def test_an_alert_announces_maintenance_and_its_resolution_withdraws_it(
        ingest_sim: SimCluster, ingest_worker: tuple[Client, str], tmp_path: Path) -> None:
    """Alertmanager's webhook: a firing ``NodeMaintenanceScheduled`` alert with the deadline in its
    ``deadline`` annotation opens the node's maintenance incident; the alert resolved withdraws it, with
    nothing done. A deadline that is no time opens no move: the incident says what was wrong."""
    client, _ = ingest_worker
    node = str(ingest_sim.state()["devices"][0]["node"])
    deadline = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=1)
    alert = {"status": "firing", "fingerprint": uuid.uuid4().hex[:16], "startsAt": "2026-11-30T10:00:00Z",
             "labels": {"alertname": "NodeMaintenanceScheduled", "node": node},
             "annotations": {"deadline": str(int(deadline.timestamp()))}}
    handle = client.get_workflow_handle_for(NodeMaintenanceWorkflow.run, f"maintenance/{node}")
    async with _front(ingest_worker, tmp_path) as post:
        status, answer = await post("/v1/alertmanager", {"version": "4", "status": "firing", "alerts": [alert]},
                                    "application/json")
        assert status == 202 and answer["incidents"] == [f"maintenance/{node}"], answer

        async def waiting() -> None:
            lines = await handle.query(NodeMaintenanceWorkflow.get_timeline)
            assert any("acting at" in line for line in lines), lines

        await assert_eventually(waiting, timeout=15)
        resolved = {**alert, "status": "resolved", "endsAt": "2026-11-30T10:05:00Z"}
        status, answer = await post("/v1/alertmanager", {"version": "4", "status": "resolved", "alerts": [resolved]},
                                    "application/json")
        assert status == 202, answer
        outcome: MaintenanceOutcome = await asyncio.wait_for(handle.result(), timeout=30)
        assert outcome.outcome == "withdrawn", outcome
        assert not _node(ingest_sim, node)["spec"].get("unschedulable")

        bad = {**alert, "fingerprint": uuid.uuid4().hex[:16], "annotations": {"deadline": "next tuesday"}}
        status, answer = await post("/v1/alertmanager", {"version": "4", "status": "firing", "alerts": [bad]},
                                    "application/json")
        assert status == 202 and answer["incidents"] == [f"maintenance/{node}"], answer
        refused: MaintenanceOutcome = await asyncio.wait_for(
            client.get_workflow_handle_for(NodeMaintenanceWorkflow.run, f"maintenance/{node}").result(), timeout=30)
        assert refused.outcome == "refused" and "'next tuesday' is neither Unix seconds nor" in refused.explanation, \
            refused
