"""Who holds a DeviceTaintRule: the ownership record on the rule, and what a release does.

The rule's name derives from the device, so every incident of the device (a new run after
the old one closed, a node incident covering it) shares one rule. The rule therefore names
each incident run that still needs it (``podmedic.io/holders``, JSON list of
``<workflow id>@<run id>``) and its current owner (``podmedic.io/incident`` and
``podmedic.io/incident-run``). A run releasing the rule takes itself off the list; only the
last holder deletes it. A rule whose spec no longer matches what podmedic wrote
(``podmedic.io/spec-hash``) was edited by an operator and is left alone.

Pure functions over plain dicts, so the decisions are unit-tested without a cluster.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Literal

from podmedic.domain.base import Obj

INCIDENT = "podmedic.io/incident"
OWNER_RUN = "podmedic.io/incident-run"
HOLDERS = "podmedic.io/holders"
SPEC_HASH = "podmedic.io/spec-hash"
CHANGED_BY = "podmedic.io/changed-by"
REASON = "podmedic.io/reason"
ORPHANED_FROM = "podmedic.io/orphaned-from"
"""On a rule every holder of which closed without letting go: the last of them, whose input and policy a new
run of the device's incident takes up if the device still reads Unhealthy (``activities/rule_sweep.py``)."""
MANAGED_BY = "app.kubernetes.io/managed-by"
POOL = "podmedic.io/pool"
"""A label on every rule podmedic makes for a pool or a device in it: ``pool_label``'s value, so a storm's
pool fence finds its devices' rules with one list instead of a get each."""

_STRENGTH = {"None": 0, "NoSchedule": 1, "NoExecute": 2}


def pool_label(driver: str, pool: str) -> str:
    """The ``POOL`` label's value for one driver's pool: a digest, as a pool's name may hold what a label
    value cannot (``/``, more than 63 characters)."""
    return hashlib.sha256(f"{driver}/{pool}".encode()).hexdigest()[:32]


def holder_id(workflow_id: str, run_id: str) -> str:
    """How one incident run is named on the rules it holds."""
    return f"{workflow_id}@{run_id}"


def spec_hash(spec: Obj) -> str:
    """Fingerprint of what a rule does (selector, taint key, value and effect; not timeAdded)."""
    taint = spec.get("taint") or {}
    what = {"selector": spec.get("deviceSelector") or {}, "key": taint.get("key"), "value": taint.get("value"),
            "effect": taint.get("effect") or "None"}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def _annotations(rule: Obj) -> dict[str, str]:
    return dict((rule.get("metadata") or {}).get("annotations") or {})


def holders_of(rule: Obj) -> list[str]:
    """The runs holding ``rule``; a rule from before holders were recorded is held by its incident."""
    notes = _annotations(rule)
    raw = notes.get(HOLDERS)
    if raw is None:
        owner = notes.get(OWNER_RUN) or notes.get(INCIDENT)
        return [owner] if owner else []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [str(h) for h in value] if isinstance(value, list) else []


def edited_by_operator(rule: Obj) -> str | None:
    """Why the rule is no longer podmedic's to change, or ``None`` when it still is."""
    labels = (rule.get("metadata") or {}).get("labels") or {}
    if labels.get(MANAGED_BY) != "podmedic":
        return f"label {MANAGED_BY} is no longer podmedic"
    recorded = _annotations(rule).get(SPEC_HASH)
    if recorded is not None and recorded != spec_hash(rule.get("spec") or {}):
        return "its spec was changed after podmedic wrote it"
    return None


def _holds(holders: list[str], holder: str) -> bool:
    # A rule recorded before run ids were kept names only the workflow id.
    return holder in holders or holder.split("@", 1)[0] in holders


@dataclass
class Release:
    """What releasing a rule does: ``delete`` it, ``patch`` the holders, or ``keep`` it untouched."""

    action: Literal["delete", "patch", "keep"]
    detail: str
    patch: Obj = field(default_factory=dict)
    remaining: list[str] = field(default_factory=list)


def plan_release(rule: Obj | None, holder: str, why: str) -> Release:
    """How ``holder`` lets go of ``rule`` without pulling it from under anyone else."""
    if rule is None:
        return Release("keep", "already gone")
    edited = edited_by_operator(rule)
    if edited:
        return Release("keep", f"kept: edited by an operator ({edited})")
    holders = holders_of(rule)
    if not _holds(holders, holder):
        return Release("keep", f"kept: held by {', '.join(holders) or 'nobody recorded'}, not by {holder}",
                       remaining=holders)
    remaining = [h for h in holders if h != holder and h != holder.split("@", 1)[0]]
    if not remaining:
        return Release("delete", "removed: no other incident holds it")
    owner = remaining[-1]
    patch = {"metadata": {
        "resourceVersion": (rule.get("metadata") or {}).get("resourceVersion"),
        "annotations": {HOLDERS: json.dumps(remaining), OWNER_RUN: owner, INCIDENT: owner.split("@", 1)[0],
                        CHANGED_BY: f"podmedic worker ({holder} released it)", REASON: why[:1000]},
    }}
    return Release("patch", f"kept for {', '.join(remaining)}", patch=patch, remaining=remaining)


def older_runs(rule: Obj, holder: str) -> list[str]:
    """Holders of ``rule`` that are other runs of ``holder``'s incident (same workflow id): after a
    Temporal reset the new run may close without ever taking the rule over from the one reset away."""
    workflow_id = holder.split("@", 1)[0]
    return [h for h in holders_of(rule) if h != holder and "@" in h and h.split("@", 1)[0] == workflow_id]


def plan_take(rule: Obj, holder: str, effect: str, why: str) -> Obj | None:
    """The patch that makes ``holder`` the owner of an existing rule (and one of its holders),
    raising its effect if ``effect`` is stronger; ``None`` when nothing needs to change."""
    holders = holders_of(rule)
    spec = rule.get("spec") or {}
    current = (spec.get("taint") or {}).get("effect") or "None"
    stronger = _STRENGTH.get(effect, 0) > _STRENGTH.get(current, 0)
    notes = _annotations(rule)
    if holder in holders and notes.get(OWNER_RUN) == holder and not stronger:
        return None
    # Runs of one workflow id never overlap: an older run of the same incident is closed, so its
    # hold (left by a terminated run, say) passes to the new one instead of pinning the rule forever.
    workflow_id = holder.split("@", 1)[0]
    new_holders = [h for h in holders if h.split("@", 1)[0] != workflow_id] + [holder]
    annotations: dict[str, str | None] = {
        HOLDERS: json.dumps(new_holders), OWNER_RUN: holder, INCIDENT: holder.split("@", 1)[0],
        CHANGED_BY: f"podmedic worker ({holder} took it over)", REASON: why[:1000]}
    if ORPHANED_FROM in notes:
        annotations[ORPHANED_FROM] = None  # held again: a merge patch's null removes the mark
    body: Obj = {"metadata": {"resourceVersion": (rule.get("metadata") or {}).get("resourceVersion"),
                              "annotations": annotations}}
    if stronger:
        taint = dict(spec.get("taint") or {})
        taint["effect"] = effect
        new_spec = {**spec, "taint": taint}
        body["spec"] = {"taint": taint}
        annotations[SPEC_HASH] = spec_hash(new_spec)
    return body


def plan_reclaim(rule: Obj, closed: list[str], why: str, by: str = "podmedic rule sweeper (fleet guard)") -> Release:
    """How the sweeper takes ``closed`` runs (each closed without letting go) off ``rule``: ``patch`` the
    holders to those left, or, when none is left, ``patch`` the rule to no holder, naming the last closed
    one in ``ORPHANED_FROM`` (``remaining`` empty): the device's health, not the sweeper, decides whether
    it goes. ``keep`` when the rule is an operator's now or none of ``closed`` holds it."""
    edited = edited_by_operator(rule)
    if edited:
        return Release("keep", f"kept: edited by an operator ({edited})")
    holders = holders_of(rule)
    gone = [h for h in holders if any(h == c or h == c.split("@", 1)[0] for c in closed)]
    if not gone:
        return Release("keep", "kept: no closed run holds it", remaining=holders)
    remaining = [h for h in holders if h not in gone]
    annotations = {HOLDERS: json.dumps(remaining), CHANGED_BY: by,
                   REASON: f"{', '.join(gone)} closed without letting go ({why})"[:1000]}
    if remaining:
        annotations.update({OWNER_RUN: remaining[-1], INCIDENT: remaining[-1].split("@", 1)[0]})
        detail = f"kept for {', '.join(remaining)}; {', '.join(gone)} taken off ({why})"
    else:
        annotations[ORPHANED_FROM] = gone[-1]
        detail = f"no holder left: {', '.join(gone)} closed ({why})"
    patch = {"metadata": {"resourceVersion": (rule.get("metadata") or {}).get("resourceVersion"),
                          "annotations": annotations}}
    return Release("patch", detail, patch=patch, remaining=remaining)


def orphaned_from(rule: Obj) -> str | None:
    """The closed run a rule with no holder was left by, or ``None`` for a rule somebody holds."""
    if holders_of(rule):
        return None
    return _annotations(rule).get(ORPHANED_FROM) or None
