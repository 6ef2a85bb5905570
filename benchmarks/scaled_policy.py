"""The shipped policy on a scaled clock, for ``python -m benchmarks goodput``.

The goodput benchmark scales time: one simulated second stands for ``scale`` real seconds, and a
broken GPU's repair, a restart, an image pull and a checkpoint are all scaled by it. The shipped
policy's waits must be scaled by the same factor, or podmedic waits for a healed device a
fraction of the time the shipped policy would, or waits far longer than it would: a 15 s wait
for the node agent's XID unscaled would stand for 15 real minutes. So every wait and window of the
policy is divided by ``scale``; only the Temporal activity limits (``steps``), which bound machines
answering, are not. What podmedic's own machinery takes (Temporal round trips, API calls) is not
scaled either and so counts ``scale`` times against it: the benchmark's figures for podmedic are
conservative by that much.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import yaml

from podmedic.domain.policy_file import PolicySet, parse_policy
from podmedic.domain.policy_layers import embedded_text

DRIVER_WAITS: tuple[tuple[str, ...], ...] = (
    ("checkpoint", "timeout_s"), ("checkpoint", "poll_s"), ("checkpoint", "hang_s"),
    ("recovery", "verify_poll_s"), ("recovery", "eviction", "retry_s"), ("recovery", "eviction", "max_wait_s"),
    ("close", "heal_wait_s"), ("close", "anti_flap_s"), ("close", "poll_s"),
    ("ticket", "wait_resolution_s"), ("ticket", "poll_s"), ("ticket", "verify_s"),
    ("node_quarantine", "hold_s"), ("node_quarantine", "poll_s"),
    ("detection", "unknown_grace_s"), ("detection", "corroborate_s"), ("detection", "node_correlation", "window_s"),
    ("detection", "flapping", "window_s"), ("repeat_offenders", "window_s"), ("approvals", "timeout_s"),
    ("detection", "stall", "after_s"), ("detection", "stall", "grace_s"), ("detection", "stall", "verify_s"),
)
"""Waits in a driver entry, scaled wherever an entry sets them."""
RUNGS = ("transient", "permanent")  # each rung's timeout_s, under recovery
GUARD_WAITS: tuple[tuple[str, ...], ...] = (
    ("window_s",), ("retry_s",), ("fleet_refresh_s",), ("storm", "window_s"), ("storm", "clear_s"))
FLOOR_S = 0.05
"""No poll or wait below this: the pipeline's own calls take about that long."""


def _scale_at(entry: MutableMapping[str, Any], path: tuple[str, ...], scale: float) -> None:
    node: Any = entry
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, MutableMapping) else None
    if isinstance(node, MutableMapping) and isinstance(node.get(path[-1]), int | float) and node[path[-1]]:
        node[path[-1]] = max(FLOOR_S, float(node[path[-1]]) / scale)  # 0 (off, or none) stays 0


def scaled_raw(raw: dict[str, Any], scale: float) -> dict[str, Any]:
    """The raw policy with its waits divided by ``scale`` (in place; returned for convenience)."""
    for entry in (raw.get("drivers") or {}).values():
        if not isinstance(entry, MutableMapping):
            continue
        for path in DRIVER_WAITS:
            _scale_at(entry, path, scale)
        for ladder in RUNGS:
            for rung in ((entry.get("recovery") or {}).get(ladder) or []):
                _scale_at(rung, ("timeout_s",), scale)
    guard = raw.get("guard")
    if isinstance(guard, MutableMapping):
        for path in GUARD_WAITS:
            _scale_at(guard, path, scale)
    return raw


def shipped_policy_scaled(scale: float, ticket_url: str = "",
                          changed: Mapping[tuple[str, ...], float] | None = None) -> PolicySet:
    """The embedded default policy as shipped (fleet guard and node quarantine on), on a clock ``scale``
    times faster, filing vendor tickets at ``ticket_url`` (none when empty); ``changed``: values of the
    default driver entry set first, by path (an ablation: ``{("checkpoint", "hang_s"): 0}``)."""
    raw: dict[str, Any] = yaml.safe_load(embedded_text())
    raw["drivers"]["default"].setdefault("ticket", {})["url"] = ticket_url
    for path, value in (changed or {}).items():
        node = raw["drivers"]["default"]
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return parse_policy(yaml.safe_dump(scaled_raw(raw, scale)), f"shipped policy, waits scaled 1/{scale:g}")
