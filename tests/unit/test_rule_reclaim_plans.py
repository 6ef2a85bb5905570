"""The sweeper's plans over one DeviceTaintRule (``activities/holders.py``): pure functions of the rule.

The rule's shape is KEP-5055's DeviceTaintRule (``metadata.annotations``, ``spec.deviceSelector``,
``spec.taint``); the holders list is podmedic's own record on it. A merge patch (RFC 7386) removes an
annotation whose value is ``null``, which is how a rule taken over loses its orphaned mark.
"""

from __future__ import annotations

import json

from activities import holders
from podmedic.domain.base import Obj

LEFT, KEPT, NODE = "device/d@run-terminated", "device/e@run-open", "node/node-0000@run-n"
SPEC: Obj = {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-0000", "device": "gpu-0"},
             "taint": {"key": "podmedic.io/unhealthy", "value": "true", "effect": "NoExecute"}}


def _rule(held: list[str], **notes: str) -> Obj:
    return {"metadata": {"name": "r", "resourceVersion": "7", "labels": {holders.MANAGED_BY: "podmedic"},
                         "annotations": {holders.HOLDERS: json.dumps(held), holders.SPEC_HASH: holders.spec_hash(SPEC),
                                         **notes}},
            "spec": SPEC}


def test_a_closed_holder_comes_off_and_the_rule_passes_to_the_one_left() -> None:
    plan = holders.plan_reclaim(_rule([LEFT, KEPT]), [LEFT], "terminated")
    notes = plan.patch["metadata"]["annotations"]
    assert plan.action == "patch" and plan.remaining == [KEPT]
    assert json.loads(notes[holders.HOLDERS]) == [KEPT] and notes[holders.OWNER_RUN] == KEPT
    assert holders.ORPHANED_FROM not in notes and "terminated" in notes[holders.REASON]
    assert plan.patch["metadata"]["resourceVersion"] == "7"  # sent only at the version read


def test_the_last_holder_closed_leaves_the_rule_to_its_device_naming_who_left_it() -> None:
    plan = holders.plan_reclaim(_rule([LEFT]), [LEFT], "terminated")
    notes = plan.patch["metadata"]["annotations"]
    assert plan.action == "patch" and plan.remaining == []
    assert json.loads(notes[holders.HOLDERS]) == [] and notes[holders.ORPHANED_FROM] == LEFT
    orphaned = _rule([], **{holders.ORPHANED_FROM: LEFT})
    assert holders.orphaned_from(orphaned) == LEFT and holders.orphaned_from(_rule([KEPT])) is None


def test_an_operators_rule_and_a_rule_no_closed_run_holds_are_kept() -> None:
    edited = _rule([LEFT])
    edited["spec"] = {**SPEC, "taint": {**SPEC["taint"], "effect": "NoSchedule"}}
    assert holders.plan_reclaim(edited, [LEFT], "terminated").action == "keep"
    assert holders.plan_reclaim(_rule([KEPT, NODE]), [LEFT], "terminated").action == "keep"


def test_a_rule_taken_over_loses_its_orphaned_mark() -> None:
    body = holders.plan_take(_rule([], **{holders.ORPHANED_FROM: LEFT}), "device/d@run-new", "NoExecute", "again")
    assert body is not None
    notes = body["metadata"]["annotations"]
    assert notes[holders.ORPHANED_FROM] is None and json.loads(notes[holders.HOLDERS]) == ["device/d@run-new"]
    untouched = holders.plan_take(_rule([KEPT]), "device/d@run-new", "NoExecute", "again")
    assert untouched is not None and holders.ORPHANED_FROM not in untouched["metadata"]["annotations"]
