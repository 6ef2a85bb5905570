"""Generated policy files, near-valid and broken (bad values, unknown keys, truncated YAML):
loading never fails any other way than a ``PolicyError`` whose every line names a place
in the file and a reason, and a policy it accepts is fully resolved for every driver."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import event as outcome
from hypothesis import strategies as st

from podmedic.domain.policy_file import PolicyError, parse_policy
from tests.fuzzkit import damage, json_values

# Real settings with a valid and a few invalid values each, so most files reach deep validation.
FIELDS: dict[tuple[str, ...], list[Any]] = {
    ("detection", "unknown_grace_s"): [0, 30, 60.5, -1, "soon"],
    ("detection", "flapping", "transitions"): [2, 4, 1],
    ("detection", "node_correlation", "devices"): [3, 8, 0],
    ("detection", "infrastructure"): [["(?i)power"], ["([unclosed"]],
    ("detection", "slice_taints"): [{"gpu.nvidia.com/xid": "by_code"}, {"k": "sometimes"}],
    ("classification", "codes", "permanent"): [[79, 48], ["x"]],
    ("classification", "unknown_code_permanence"): ["transient", "permanent", "forever"],
    ("steps", "taint", "retry", "max_attempts"): [0, 5, -2],
    ("steps", "recover", "retry"): [{"initial_interval_s": 5, "max_interval_s": 1}],
    ("checkpoint", "timeout_s"): [30, 0],
    ("taint", "permanent"): ["NoExecute", "NoSchedule", "Evict"],
    ("recovery", "transient"): [[{"action": "in_place_restart", "attempts": 2}], [{"action": "reboot"}], []],
    ("ticket", "backend"): ["none", "webhook", "fax"],
    ("close", "anti_flap_s"): [0, 60, -5],
    ("approvals", "gates"): [[{"action": "taint"}], [{"action": "taint"}, {"action": "taint"}], [{"action": "x"}]],
}
DRIVERS = ["default", "gpu.nvidia.com", "gpu.amd.com"]


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


@st.composite
def policy_texts(draw: st.DrawFn) -> str:
    drivers: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(DRIVERS), min_size=1, max_size=3, unique=True)):
        entry: dict[str, Any] = {}
        for path in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=4, unique=True)):
            choices = FIELDS[path]
            # A copy: the damage step edits in place and FIELDS must stay the same for every case.
            _put(entry, path, copy.deepcopy(draw(st.sampled_from([choices[0]] * 3 + choices))))
        drivers[name] = entry
    doc: Any = {"drivers": drivers}
    if draw(st.sampled_from([False] * 4 + [True])):
        damage(draw, doc, json_values | st.sampled_from(["", "NoExecute", -1]), most=2)
    if draw(st.sampled_from([False] * 19 + [True])):
        doc = draw(json_values)
    text = yaml.safe_dump(doc, sort_keys=False)
    if draw(st.sampled_from([False] * 14 + [True])):
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    return text


def _top_keys(text: str) -> set[str]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return set()
    return {str(k) for k in doc} if isinstance(doc, dict) else set()


def _check(text: str) -> None:
    try:
        policies = parse_policy(text, "generated")
    except PolicyError as refusal:
        outcome("refused")
        assert refusal.errors and refusal.source == "generated"
        for where, why in refusal.errors:
            # A place in the file: a path under drivers or guard, a line, or a top-level key the file has.
            assert where.startswith(("drivers", "guard", "(top)", "line ", "(file)")) or where in _top_keys(text), where
            assert why.strip(), where
        return
    outcome("accepted")
    for driver in (*policies.drivers, "some.other.driver"):
        resolved = policies.for_driver(driver)
        assert resolved.driver == driver
        assert resolved.close.anti_flap_s >= 0 and resolved.detection.flapping.transitions >= 2


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=policy_texts())
def test_generated_policies(text: str) -> None:
    _check(text)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=policy_texts())
def test_generated_policies_long(text: str) -> None:
    _check(text)
