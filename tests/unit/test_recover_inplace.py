"""Which exits restart in place, and which mechanism may act on which pod (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from activities.recovery.inplace import exit_action, plan, restarted
from activities.recovery.verify import Verification
from podmedic.domain.policy_recovery import InPlace
from podmedic_sim.exec_ws import parse_kill


def _pod(rules: list[dict[str, Any]], code: str | None = "85", containers: int = 1) -> dict[str, Any]:
    extra = [{"name": f"side{i}", "image": "x"} for i in range(containers - 1)]
    return {
        "metadata": {"name": "p", "annotations": {"podmedic.io/restart-exit-code": code} if code else {}},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "trainer", "image": "x", "restartPolicy": "Never", "restartPolicyRules": rules,
             "resources": {"claims": [{"name": "gpu"}]}}, *extra]},
    }


def _rule(action: str, *codes: int, op: str = "In") -> dict[str, Any]:
    return {"action": action, "exitCodes": {"operator": op, "values": list(codes)}}


def test_exit_action_first_matching_rule_then_policies() -> None:
    c = {"name": "c", "restartPolicyRules": [_rule("Restart", 85), _rule("RestartAllContainers", 0, op="NotIn")]}
    assert exit_action(c, "Never", 85) == "Restart"
    assert exit_action(c, "Never", 3) == "RestartAllContainers"
    assert exit_action({"name": "c"}, "OnFailure", 0) == "DoNotRestart"
    assert exit_action({"name": "c"}, "OnFailure", 1) == "Restart"
    assert exit_action({"name": "c", "restartPolicy": "Never"}, "Always", 1) == "DoNotRestart"


def test_plan_per_mechanism() -> None:
    assert plan(_pod([_rule("Restart", 85)]), InPlace()) == ("trainer", 85)
    all_ = InPlace(mechanism="restart_all_containers")
    assert "RestartAllContainers" in str(plan(_pod([_rule("Restart", 85)]), all_))
    assert plan(_pod([_rule("RestartAllContainers", 85)]), all_) == ("trainer", 85)
    assert "declares no" in str(plan(_pod([_rule("Restart", 85)], code=None), InPlace()))
    assert plan(_pod([_rule("Restart", 143)]), InPlace(mechanism="exec_signal")) == ("trainer", 143)
    assert plan(_pod([_rule("Restart", 138)]), InPlace(mechanism="exec_signal", signal="SIGUSR1")) == ("trainer", 138)
    assert "would not be restarted" in str(plan(_pod([_rule("Restart", 85)]), InPlace(mechanism="exec_signal")))


def test_unknown_signal_is_refused_with_the_field() -> None:
    with pytest.raises(ValidationError, match="unknown signal"):
        InPlace(mechanism="exec_signal", signal="WINCH")


def test_restarted_needs_every_container_for_restart_all() -> None:
    pod = {"metadata": {}, "status": {
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "trainer", "restartCount": 1,
             "allocatedResourcesStatus": [{"name": "claim:gpu/gpu", "resources": [
                 {"resourceID": "d/p/gpu-0", "health": "Healthy"}]}]},
            {"name": "side1", "restartCount": 0}]}}
    base = {"trainer": 0, "side1": 0}
    assert restarted(pod, base, InPlace(), "trainer")
    assert not restarted(pod, base, InPlace(mechanism="restart_all_containers"), "trainer")


def test_progress_must_move_past_the_first_reading() -> None:
    def pod(step: int | None) -> dict[str, Any]:
        notes = {"podmedic.io/reports-progress": "true"} | ({"podmedic.io/progress": str(step)} if step else {})
        return {"metadata": {"annotations": notes}}

    check = Verification(want_progress=True)
    assert check.offer(None) is None and check.offer(pod(None)) is None
    assert check.offer(pod(40)) is None and check.offer(pod(40)) is None
    assert check.offer(pod(41)) is not None
    assert Verification(want_progress=False).offer(pod(40)) is not None
    assert "did not progress past step 7" in _stalled()


def test_progress_after_resuming_from_an_older_checkpoint() -> None:
    # Before the restart the job stood at step 201; its checkpoint was step 38. The annotation still says
    # 201 when the pod is Ready again; the resumed job then writes 39, 40, ...: that is progress.
    def pod(step: int) -> dict[str, Any]:
        return {"metadata": {"annotations": {"podmedic.io/reports-progress": "true",
                                             "podmedic.io/progress": str(step)}}}

    check = Verification(want_progress=True)
    assert check.offer(pod(201)) is None
    assert check.offer(pod(39)) is None  # rewritten: the new baseline, not yet progress
    assert check.offer(pod(39)) is None
    verified = check.offer(pod(40))
    assert verified is not None
    assert "step 39 -> 40 (resumed from a checkpoint; step 201 before the restart)" in check.progress_note(verified)


def _stalled() -> str:
    check = Verification(want_progress=True)
    check.offer({"metadata": {"annotations": {"podmedic.io/reports-progress": "true", "podmedic.io/progress": "7"}}})
    return check.failure(5, "x")


def test_parse_kill_forms() -> None:
    assert parse_kill(["kill", "-s", "TERM", "1"]) == (15, "1")
    assert parse_kill(["/bin/kill", "-USR1", "1"]) == (10, "1")
    assert parse_kill(["kill", "-n", "9", "1"]) == (9, "1")
    assert parse_kill(["kill", "1"]) == (15, "1")
    assert "invalid signal" in str(parse_kill(["kill", "-s", "NOPE", "1"]))
    assert str(parse_kill(["ls"])).endswith("not found")
