"""When a workload counts as stalled, one function at a time (the ingest's ``ProgressTracker``, the stall
incident's ``moved_since``).

Expected shapes from the progress protocol (docs/checkpoint-protocol.md: ``podmedic.io/reports-progress``
opts a pod in, ``podmedic.io/progress`` is its step) and from the labels a controller puts on its pods
(JobSet ``jobset.sigs.k8s.io/jobset-name``, Job ``batch.kubernetes.io/job-name``), not from the code.
"""

from __future__ import annotations

from typing import Any

from activities.stall import moved_since
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.stall import workload_of
from workers.ingest.sources.progress import ProgressTracker

POLICIES = parse_policy("""
drivers:
  default:
    detection: {stall: {after_s: 10}}
  gpu.nvidia.com:
    detection: {stall: {after_s: 30}}
""")


def _pod(uid: str, step: str | None, *, jobset: str = "llm", reports: bool = True, phase: str = "Running",
         own: str | None = None) -> dict[str, Any]:
    notes = {"podmedic.io/reports-progress": "true" if reports else "false"}
    if step is not None:
        notes["podmedic.io/progress"] = step
    if own is not None:
        notes["podmedic.io/stall-s"] = own
    return {"metadata": {"uid": uid, "name": f"{jobset}-{uid}", "namespace": "ml", "annotations": notes,
                         "labels": {"jobset.sigs.k8s.io/jobset-name": jobset,
                                    "batch.kubernetes.io/job-name": f"{jobset}-node-{uid}"}},
            "spec": {"nodeName": "node-1"},
            "status": {"phase": phase, "containerStatuses": [{"name": "trainer", "state": {"running": {}}}]}}


def _tracker(*pods: dict[str, Any], at: float = 0.0, device: str | None = None) -> ProgressTracker:
    tracker = ProgressTracker(POLICIES)
    for pod in pods:
        tracker.see(pod, device, at)
    return tracker


def test_a_workload_standing_still_for_its_window_is_one_stall_under_its_outermost_controller() -> None:
    tracker = _tracker(_pod("a", "7"), _pod("b", "7"))
    assert tracker.stalled(9.9) == [], "not for the whole window yet"
    [stall] = tracker.stalled(10.0)
    assert (stall.namespace, stall.kind, stall.name, stall.driver) == ("ml", "JobSet", "llm", "default")
    assert [(p.pod.uid, p.step) for p in stall.pods] == [("a", "7"), ("b", "7")] and stall.after_s == 10
    assert stall.workflow_id == "workload/ml/JobSet/llm"
    tracker.told(stall)
    assert tracker.stalled(100.0) == [], "the same stall is told once"


def test_a_step_anywhere_restarts_the_clock_and_a_later_stall_is_news_again() -> None:
    tracker = _tracker(_pod("a", "7"), _pod("b", "7"))
    [stall] = tracker.stalled(10.0)
    tracker.told(stall)
    tracker.see(_pod("b", "8"), None, 12.0)
    assert tracker.stalled(21.0) == [], "b moved at 12 s"
    [again] = tracker.stalled(22.0)
    assert [p.step for p in again.pods] == ["7", "8"]


def test_what_reports_nothing_or_does_not_run_is_never_judged() -> None:
    tracker = _tracker(_pod("a", "7", reports=False), _pod("b", None, jobset="other"),
                       _pod("c", "7", jobset="done", phase="Succeeded"))
    assert tracker.stalled(1e6) == []
    tracker = _tracker(_pod("a", "7"))
    tracker.see(_pod("a", "7", phase="Failed"), None, 1.0)
    assert tracker.stalled(1e6) == [], "a pod that stopped running is forgotten"


def test_the_devices_driver_sets_the_window_and_a_pod_may_set_its_own() -> None:
    tracker = _tracker(_pod("a", "7"), device="gpu.nvidia.com/node-1/gpu-0")
    assert tracker.stalled(29.0) == []
    [stall] = tracker.stalled(30.0)
    assert stall.driver == "gpu.nvidia.com" and stall.after_s == 30
    assert [s.after_s for s in _tracker(_pod("a", "7", own="3")).stalled(3.0)] == [3.0]
    assert _tracker(_pod("a", "7", own="0")).stalled(1e6) == [], "podmedic.io/stall-s 0: never judged"
    bad = _tracker(_pod("a", "7", own="soon"))
    assert [s.after_s for s in bad.stalled(10.0)] == [10.0] and bad.bad_windows == {"a"}


def test_the_workload_is_its_outermost_controller() -> None:
    assert workload_of(_pod("a", "1")) == ("JobSet", "llm", "")
    job = {"metadata": {"labels": {"batch.kubernetes.io/job-name": "train"}}}
    assert workload_of(job) == ("Job", "train", "")
    owned = {"metadata": {"ownerReferences": [{"kind": "StatefulSet", "name": "web", "controller": True}]}}
    assert workload_of(owned) == ("StatefulSet", "web", "")
    assert workload_of({"metadata": {}}) is None


def _lws_pod(uid: str, step: str, group: str) -> dict[str, Any]:
    """A LeaderWorkerSet pod as LWS's pod webhook labels it (kubernetes-sigs/lws pkg/webhooks/pod_webhook.go)."""
    pod = _pod(uid, step)
    pod["metadata"]["labels"] = {"leaderworkerset.sigs.k8s.io/name": "ws",
                                 "leaderworkerset.sigs.k8s.io/group-index": group}
    return pod


def test_each_leaderworkerset_group_stalls_on_its_own() -> None:
    # A group is one replica of a model sharded over its pods (kubernetes-sigs/lws README): another group
    # stepping says nothing of this one.
    assert workload_of(_lws_pod("a", "1", "1")) == ("LeaderWorkerSet", "ws", "1")
    tracker = ProgressTracker(POLICIES)
    for uid, group in (("a", "0"), ("b", "0"), ("c", "1"), ("d", "1")):
        tracker.see(_lws_pod(uid, "7", group), None, 0.0)
    for now in (4.0, 8.0):
        tracker.see(_lws_pod("c", str(now), "1"), None, now)
    [stall] = tracker.stalled(10.0)
    assert (stall.kind, stall.name, stall.group) == ("LeaderWorkerSet", "ws", "0")
    assert [p.pod.uid for p in stall.pods] == ["a", "b"]
    assert stall.workflow_id == "workload/ml/LeaderWorkerSet/ws/0"


def test_what_counts_as_moving_before_acting_and_after() -> None:
    since = {"a": "7", "b": "7"}
    assert moved_since([_pod("a", "7"), _pod("b", "7")], since, {}) == ""
    assert "moved: step 7 -> 8" in moved_since([_pod("a", "7"), _pod("b", "8")], since, {})
    assert "is gone" in moved_since([_pod("a", "7")], since, {}), "before acting: restarting by itself"
    first: dict[str, str] = {}
    assert moved_since([_pod("a", "7"), _pod("c", "5")], since, first, gone_moves=False) == ""
    assert moved_since([_pod("a", "7"), _pod("c", "6")], since, first, gone_moves=False) == \
        "llm-c (new) moved: step 5 -> 6"
    # After ending a rank the workload restarts: its pods' steps go back to the checkpoint (the simulator's
    # trainer, as a trainer resuming from its last save, reports the step it resumed at) before it trains.
    readings: dict[str, str] = {}
    assert moved_since([_pod("a", "0"), _pod("b", "0")], since, readings, gone_moves=False) == "", "a step back"
    assert moved_since([_pod("a", "1"), _pod("b", "0")], since, readings, gone_moves=False) == \
        "llm-a moved: step 0 -> 1", "training again from the checkpoint"
    assert "moved: step 7 -> 0" in moved_since([_pod("a", "0"), _pod("b", "7")], since, {}), "before acting it is"
    assert moved_since([_pod("a", "8")], since, {}, gone_moves=False) == "llm-a moved: step 7 -> 8"


def test_a_crash_looping_pod_is_not_a_hang_and_a_checkpoint_podmedic_asked_for_restarts_the_clock() -> None:
    looping = _pod("a", "7")
    looping["status"]["containerStatuses"] = [{"name": "trainer", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    assert _tracker(looping).stalled(1e6) == []
    tracker = _tracker(_pod("a", "7"))
    asked = _pod("a", "7")
    asked["metadata"]["annotations"]["podmedic.io/checkpoint-request"] = "device/x#ckpt#0"
    tracker.see(asked, None, 8.0)
    assert tracker.stalled(17.0) == [], "the save podmedic asked for at 8 s gets a whole window"
    assert len(tracker.stalled(18.0)) == 1


def test_what_it_remembers_goes_with_the_pods() -> None:
    tracker = _tracker(_pod("a", "7", own="soon"))
    [stall] = tracker.stalled(10.0)
    tracker.told(stall)
    tracker.keep_only(set())
    assert tracker.stalled(20.0) == [] and tracker.bad_windows == set()
    assert tracker._told == {}, "a workload with no reporting pod left is forgotten"
