"""Generated policy files against the documented format: a valid file is accepted and its values are the
ones in force, and a file breaking one rule is refused naming exactly where in the file.

The format is the one the shipped policy documents in its comments (podmedic/domain/default_policy.yaml,
and docs/detection.md, docs/recovery*.md): ``drivers`` maps a driver name (``default`` required) to its
policy; a driver's entry is laid over ``default`` section by section. A parser refusing everything, or
accepting everything, fails here
(``tests/fuzz/test_policy_property.py`` only proves it never crashes).
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from podmedic.domain.policy_file import PolicyError, parse_policy

# Knobs with the values the documentation allows, and how to read each back from a resolved policy.
VALID: dict[tuple[str, ...], list[Any]] = {
    ("detection", "unknown_grace_s"): [0, 30, 60.5],
    ("detection", "flapping", "transitions"): [2, 4],
    ("detection", "node_correlation", "devices"): [2, 3, 8],
    ("classification", "unknown_code_permanence"): ["transient", "permanent"],
    ("checkpoint", "timeout_s"): [30, 600],
    ("close", "anti_flap_s"): [0, 60],
    ("ticket", "backend"): ["none", "webhook"],  # jira and servicenow need their own section
    ("taint", "permanent"): ["NoExecute", "NoSchedule"],
}
# One broken rule each: the knob, a value the documentation does not allow.
BROKEN: dict[tuple[str, ...], list[Any]] = {
    ("detection", "unknown_grace_s"): [-1, "soon"],
    ("detection", "flapping", "transitions"): [1],
    ("classification", "unknown_code_permanence"): ["forever"],
    ("close", "anti_flap_s"): [-5],
    ("ticket", "backend"): ["fax"],
    ("taint", "permanent"): ["Evict"],
}
DRIVERS = ["default", "gpu.nvidia.com", "gpu.amd.com"]


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _read(policy: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        policy = getattr(policy, key)
    return getattr(policy, "value", policy)  # an enum reads as its YAML spelling


@st.composite
def valid_files(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    drivers: dict[str, dict[str, Any]] = {"default": {}}
    for name in draw(st.lists(st.sampled_from(DRIVERS[1:]), max_size=2, unique=True)):
        drivers[name] = {}
    for entry in drivers.values():
        for path in draw(st.lists(st.sampled_from(sorted(VALID)), max_size=4, unique=True)):
            _put(entry, path, draw(st.sampled_from(VALID[path])))
    return drivers


def _set_value(entry: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(entry, dict) or key not in entry:
            return None
        entry = entry[key]
    return entry


@settings(max_examples=300, deadline=None)
@given(drivers=valid_files())
def test_a_valid_file_is_accepted_and_each_value_is_in_force(drivers: dict[str, dict[str, Any]]) -> None:
    policies = parse_policy(yaml.safe_dump({"drivers": drivers}), "generated")
    for name in [*drivers, "some.other.driver"]:
        resolved = policies.for_driver(name)
        assert resolved.driver == name
        for path in VALID:
            own = _set_value(drivers.get(name, {}), path)
            expected = own if own is not None else _set_value(drivers["default"], path)
            if expected is not None:  # what the file sets: the driver's own value, else default's
                assert _read(resolved, path) == expected, (name, path)


@settings(max_examples=300, deadline=None)
@given(drivers=valid_files(), data=st.data())
def test_one_broken_value_is_refused_at_its_place(drivers: dict[str, dict[str, Any]], data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(drivers)))
    path = data.draw(st.sampled_from(sorted(BROKEN)))
    _put(drivers[name], path, data.draw(st.sampled_from(BROKEN[path])))
    try:
        parse_policy(yaml.safe_dump({"drivers": drivers}), "generated")
    except PolicyError as refusal:
        where = f"drivers.{name}." + ".".join(path)
        assert where in [w for w, _ in refusal.errors], refusal.errors
        return
    raise AssertionError(f"accepted {name}.{'.'.join(path)} = {_set_value(drivers[name], path)!r}")


@settings(max_examples=100, deadline=None)
@given(drivers=valid_files(), key=st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True))
def test_an_unknown_section_is_refused_by_name(drivers: dict[str, dict[str, Any]], key: str) -> None:
    known = {"detection", "classification", "checkpoint", "close", "ticket", "taint", "steps", "recovery",
             "approvals", "node_quarantine", "repeat_offenders", "dry_run", "guard", "driver"}
    if key in known:
        return
    drivers["default"][key] = {"x": 1}
    try:
        parse_policy(yaml.safe_dump({"drivers": drivers}), "generated")
    except PolicyError as refusal:
        assert any(w.startswith(f"drivers.default.{key}") for w, _ in refusal.errors), refusal.errors
        return
    raise AssertionError(f"accepted an unknown section {key!r}")
