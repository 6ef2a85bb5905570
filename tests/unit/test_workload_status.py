"""A workload runs whole by its own status; an in-place JobSet once its barrier lifted.

Sources of the shapes: kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go`` (``JobSetStatus``:
``currentInPlaceRestartAttempt``, ``previousInPlaceRestartAttempt``; ``FailurePolicy.RestartStrategy``) and
``pkg/controllers/in_place_restart.go`` (the barrier lifts when every pod's
``jobset.sigs.k8s.io/in-place-restart-attempt`` equals the current attempt; Failed pods do not count).
"""

from __future__ import annotations

from typing import Any

from activities.recovery.workload_status import barrier_not_lifted, others_line, restart_counts
from podmedic.domain.workloads import IN_PLACE_RESTART_ATTEMPT, restarts_in_place


def _jobset(current: int | None, strategy: str = "InPlaceRestart") -> dict[str, Any]:
    status = {} if current is None else {"currentInPlaceRestartAttempt": current}
    return {"spec": {"failurePolicy": {"maxRestarts": 3, "restartStrategy": strategy}}, "status": status}


def _pod(name: str, attempt: int | None, phase: str = "Running", restarts: int = 0) -> dict[str, Any]:
    annotations = {} if attempt is None else {IN_PLACE_RESTART_ATTEMPT: str(attempt)}
    return {"metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations},
            "status": {"phase": phase, "containerStatuses": [{"name": "trainer", "restartCount": restarts}]}}


def test_the_barrier_is_lifted_only_when_every_live_pod_is_at_the_current_attempt() -> None:
    assert barrier_not_lifted(_jobset(1), [_pod("a", 1), _pod("b", 1)]) is None
    why = barrier_not_lifted(_jobset(1), [_pod("a", 1), _pod("b", 2)])
    assert why == "in-place restart: 1 of 2 pods at attempt 1 (waiting: b)", why
    # A replacement that has not written its attempt yet waits too; a Failed pod is not counted.
    assert barrier_not_lifted(_jobset(1), [_pod("a", 1), _pod("new", None)]) is not None
    assert barrier_not_lifted(_jobset(1), [_pod("a", 1), _pod("old", 0, phase="Failed")]) is None
    assert barrier_not_lifted(_jobset(None), [_pod("a", 0)]) is not None, "no attempt is current yet"


def test_only_the_in_place_strategy_counts() -> None:
    assert restarts_in_place(_jobset(0)) and not restarts_in_place(_jobset(0, strategy="Recreate"))
    assert not restarts_in_place({"spec": {}})


def test_what_became_of_the_other_pods() -> None:
    before = restart_counts([_pod("a", 0), _pod("b", 0), _pod("c", 0)])
    after = restart_counts([_pod("a", 1, restarts=1), _pod("b", 1), _pod("d", 1)])
    assert others_line("JobSet train", before, after) == \
        "JobSet train: of its 3 other pods, 2 kept (1 restarted in place), 1 recreated"
