"""Taints and tolerations, shared by node taints (pods) and device taints (claims).

Device tolerations (KEP-5055) use the same matching rules as pod tolerations: operator
``Exists`` or ``Equal`` (the default), an empty key with ``Exists`` matches every taint,
an empty effect matches every effect.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Taint:
    """A device taint in force, with where it comes from (a DeviceTaintRule or the slice)."""

    key: str
    value: str
    effect: str
    time_added: float  # wall-clock epoch seconds
    source: str  # "rule/<name>" or "slice"

    def to_json(self) -> dict[str, Any]:
        """The taint as the Kubernetes API writes it."""
        return {
            "key": self.key,
            "value": self.value,
            "effect": self.effect,
            "timeAdded": format_time(self.time_added),
        }


def parse_time(value: str | None, default: float | None = None) -> float:
    """Epoch seconds of an RFC 3339 timestamp; ``default`` (or now) when absent or bad."""
    if value:
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return time.time() if default is None else default


def format_time(epoch: float) -> str:
    """RFC 3339 UTC timestamp with second precision, as Kubernetes writes them."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def toleration_matches(tol: dict[str, Any], key: str, value: str, effect: str) -> bool:
    """Whether one toleration matches a taint ``key=value:effect``."""
    tol_effect = tol.get("effect") or ""
    if tol_effect and tol_effect != effect:
        return False
    operator = tol.get("operator") or "Equal"
    tol_key = tol.get("key") or ""
    if operator == "Exists":
        return not tol_key or tol_key == key
    return tol_key == key and (tol.get("value") or "") == value


def find_toleration(
    tolerations: list[dict[str, Any]] | None, key: str, value: str, effect: str
) -> dict[str, Any] | None:
    """The first toleration matching the taint, or ``None``."""
    for tol in tolerations or []:
        if toleration_matches(tol, key, value, effect):
            return tol
    return None


def blocks_scheduling(effect: str) -> bool:
    """Effects that keep new allocations off a device or node (``None`` never does)."""
    return effect in ("NoSchedule", "NoExecute")
