"""Warm spares: nodes kept free so that a failed rank whose own node has no free healthy GPU has somewhere
to go at once, instead of waiting for capacity or for its whole workload to move.

A spare is an ordinary node of a pool (the nodes sharing one value of ``pool_label``) that podmedic
taints ``podmedic.io/spare=<pool>:NoSchedule``: no new workload lands there, and only the replacements
podmedic pins there (a placement hold, ``placement_holds.py``) tolerate the taint; podmedic's admission
webhook takes the toleration off any other pod (``workers/admission/review.py``). The fleet guard keeps
``per_pool`` spares in every pool (``activities/spares.py``), re-checking them every ``every_s``:

- a spare must be able to take a rank: Ready, not cordoned, no other blocking taint (a node
  quarantine), every device published with no blocking taint and no DeviceTaintRule on it (the node
  agent's and the driver's reports of a failed device end up as one of those);
- a spare a replacement landed on has done its job: it becomes an ordinary node (the taint comes off,
  its other devices go back to the scheduler), and another free node of the pool takes its place;
- only a node where no device is allocated becomes a spare: podmedic never moves a workload to make one.

Pure functions over API objects (plain dicts): no I/O here.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from podmedic.domain.base import ConfigModel, Obj

SPARE_TAINT = "podmedic.io/spare"
SPARE_POOL = "podmedic.io/spare-pool"
"""Node annotation ``<label>=<value>``: the pool a spare serves (read by a reschedule, which has no policy)."""
CHANGED_BY = "podmedic.io/changed-by"
REASON = "podmedic.io/reason"
KEEPER = "podmedic fleet guard (warm spares)"
_BLOCKING = ("NoSchedule", "NoExecute")


class SparesPolicy(ConfigModel):
    """Warm spares: ``per_pool`` nodes of every pool kept free for failed ranks (0: none kept, any kept are
    given back). The spares' GPUs do no work while they wait: that is their cost."""

    per_pool: int = Field(0, ge=0, description="Nodes kept as warm spares in each pool (0: none).")
    pool_label: str = Field("nvidia.com/gpu.product", min_length=1, description=(
        "The node label whose value names a node's pool: a spare serves the nodes with the same value (the "
        "same GPU). GPU Feature Discovery sets the default; a cloud's node-pool label also fits. Nodes without "
        "the label are in no pool."))
    every_s: float = Field(60.0, gt=0, description="How often the guard checks its spares and tops them up.")


class SpareChange(BaseModel):
    """One node made a spare, or given back."""

    node: str
    pool: str
    action: Literal["add", "drop"]
    why: str


class PoolSpares(BaseModel):
    """A pool's spares after one keeping: who they are, and how many are missing for want of a free node."""

    pool: str
    spares: list[str] = Field(default_factory=list)
    short: int = 0


class SparesInput(BaseModel):
    """The guard's spares policy, as its latest incident carried it."""

    policy: SparesPolicy


class SparesReport(BaseModel):
    """What one keeping found and changed (``podmedic guard status``)."""

    pools: list[PoolSpares] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list, description="Changes the API refused; tried again next time.")

    @property
    def held(self) -> int:
        """Spares held in every pool together."""
        return sum(len(p.spares) for p in self.pools)


def pool_of(node: Obj, label: str) -> str | None:
    """The node's pool (the value of ``label``), or ``None``."""
    value = ((node.get("metadata") or {}).get("labels") or {}).get(label)
    return str(value) if value else None


def is_spare(node: Obj) -> bool:
    """Whether podmedic holds ``node`` as a spare."""
    return any(t.get("key") == SPARE_TAINT for t in (node.get("spec") or {}).get("taints") or [])


def served_by(node: Obj, spare: Obj) -> bool:
    """Whether ``spare`` serves ``node``'s pool (by the pool it was made a spare for)."""
    label, _, value = str(((spare.get("metadata") or {}).get("annotations") or {}).get(SPARE_POOL, "")).partition("=")
    return bool(label) and is_spare(spare) and pool_of(node, label) == value and \
        spare["metadata"]["name"] != node["metadata"]["name"]


def _ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _rule_selects(rule: Obj, driver: str, pool: str, device: str) -> bool:
    spec = rule.get("spec") or {}
    sel = spec.get("deviceSelector") or {}
    return (spec.get("taint") or {}).get("effect") in _BLOCKING and sel.get("driver") in (None, driver) \
        and sel.get("pool") in (None, pool) and sel.get("device") in (None, device)


class Fleet:
    """The nodes, their devices and what holds them, read once for one keeping."""

    def __init__(self, nodes: list[Obj], slices: list[Obj], claims: list[Obj], rules: list[Obj]) -> None:
        self.nodes = sorted(nodes, key=lambda n: str(n["metadata"]["name"]))
        self.devices: dict[str, list[tuple[str, str, str, bool]]] = defaultdict(list)
        pools: dict[tuple[str, str], str] = {}
        for s in slices:
            spec = s.get("spec") or {}
            node, driver = spec.get("nodeName"), str(spec.get("driver", ""))
            pool = str((spec.get("pool") or {}).get("name", ""))
            if not node:
                continue
            pools[(driver, pool)] = node
            for d in spec.get("devices") or []:
                tainted = any(t.get("effect") in _BLOCKING for t in d.get("taints") or []) or \
                    any(_rule_selects(r, driver, pool, d["name"]) for r in rules)
                self.devices[node].append((driver, pool, d["name"], tainted))
        self.busy: set[str] = set()
        for claim in claims:
            for r in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
                node = pools.get((str(r.get("driver", "")), str(r.get("pool", ""))))
                if node:
                    self.busy.add(node)

    def unfit(self, node: Obj) -> str | None:
        """Why ``node`` cannot take a rank (``None``: it can)."""
        name = node["metadata"]["name"]
        if not _ready(node):
            return "not Ready"
        if (node.get("spec") or {}).get("unschedulable"):
            return "cordoned"
        other = [t["key"] for t in (node.get("spec") or {}).get("taints") or []
                 if t.get("key") != SPARE_TAINT and t.get("effect") in _BLOCKING]
        if other:
            return f"tainted {', '.join(other)}"
        if not self.devices.get(name):
            return "publishes no device"
        bad = [f"{d}/{p}/{dev}" for d, p, dev, tainted in self.devices[name] if tainted]
        if bad:
            return f"device(s) out of service: {', '.join(bad)}"
        return None


def plan_spares(fleet: Fleet, policy: SparesPolicy) -> tuple[list[SpareChange], list[PoolSpares]]:
    """The changes that leave every pool with ``policy.per_pool`` fit, unused spares, and the pools after them."""
    pools: dict[str, list[Obj]] = defaultdict(list)
    changes: list[SpareChange] = []
    for node in fleet.nodes:
        pool = pool_of(node, policy.pool_label)
        if is_spare(node):
            served = str((node["metadata"].get("annotations") or {}).get(SPARE_POOL, ""))
            if pool is None or served != f"{policy.pool_label}={pool}":
                changes.append(SpareChange(node=node["metadata"]["name"], pool=served, action="drop",
                                           why=f"its pool is no longer {served} (pool_label {policy.pool_label})"))
                continue
        if pool is not None:
            pools[pool].append(node)
    after = []
    for pool, members in sorted(pools.items()):
        kept: list[str] = []
        for node in (n for n in members if is_spare(n)):
            name = node["metadata"]["name"]
            why = fleet.unfit(node)
            if why is None and name in fleet.busy:
                why = "a replacement runs there: an ordinary node now"
            if why is None and len(kept) >= policy.per_pool:
                why = f"more spares than per_pool ({policy.per_pool})"
            if why is None:
                kept.append(name)
            else:
                changes.append(SpareChange(node=name, pool=pool, action="drop", why=why))
        free = [n["metadata"]["name"] for n in members if not is_spare(n)
                and n["metadata"]["name"] not in fleet.busy and fleet.unfit(n) is None]
        for name in free[: max(0, policy.per_pool - len(kept))]:
            changes.append(SpareChange(node=name, pool=pool, action="add",
                                       why=f"kept free for failed ranks of pool {pool} ({len(kept) + 1} of "
                                           f"{policy.per_pool})"))
            kept.append(name)
        after.append(PoolSpares(pool=pool, spares=kept, short=max(0, policy.per_pool - len(kept))))
    return changes, after


def spare_patch(node: Obj, change: SpareChange, label: str, now: dt.datetime) -> Obj:
    """The merge patch making ``node`` a spare or giving it back, at the version it was planned on (the
    taints are one list in a patch: a concurrent change is a conflict, never lost), saying who and why."""
    taints: list[dict[str, Any]] = [t for t in (node.get("spec") or {}).get("taints") or []
                                    if t.get("key") != SPARE_TAINT]
    notes: dict[str, str | None] = {CHANGED_BY: KEEPER, REASON: f"{change.action} spare: {change.why}"[:1000]}
    if change.action == "add":
        taints.append({"key": SPARE_TAINT, "value": change.pool[:63], "effect": "NoSchedule",
                       "timeAdded": now.strftime("%Y-%m-%dT%H:%M:%SZ")})
        notes[SPARE_POOL] = f"{label}={change.pool}"
    else:
        notes[SPARE_POOL] = None
    return {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"], "annotations": notes},
            "spec": {"taints": taints}}


SPARE_TOLERATION: dict[str, str] = {"key": SPARE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
"""What a replacement pinned to a spare carries, and no other pod."""


def spare_tolerations(tolerations: Iterable[Obj]) -> list[Obj]:
    """The tolerations naming podmedic's spare taint (a key-less ``Exists`` tolerates every taint: a
    DaemonSet's, left alone)."""
    return [t for t in tolerations if t.get("key") == SPARE_TAINT]


def unspare_patch(pod: Obj) -> list[dict[str, Any]]:
    """RFC 6902 operations taking podmedic's spare toleration off a pod podmedic did not pin to a spare
    (empty: it has none), so that only podmedic's replacements land on spares."""
    tolerations = list((pod.get("spec") or {}).get("tolerations") or [])
    if not spare_tolerations(tolerations):
        return []
    kept = [t for t in tolerations if t.get("key") != SPARE_TAINT]
    return [{"op": "replace", "path": "/spec/tolerations", "value": kept}]
