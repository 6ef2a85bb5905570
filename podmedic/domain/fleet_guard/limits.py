"""The fleet guard's arithmetic: pure functions over its ``Ledger``, for the guard workflow.

Everything takes ``now`` (workflow time) and the policy of the request, so the same inputs
give the same answer on every replay.
"""

from __future__ import annotations

import datetime as dt
import math

from podmedic.domain.fleet_guard.messages import (
    FleetSize,
    Ledger,
    Observation,
    Permit,
    PermitAnswer,
    PermitRequest,
    Sighting,
    StormRecord,
)
from podmedic.domain.fleet_guard.policy import GuardPolicy


def nodes_disrupted(ledger: Ledger) -> set[str]:
    """Distinct nodes with something under remediation."""
    return {p.node for p in ledger.permits.values()}


def allowed(share: float, size: int, floor: int) -> int:
    """Devices a share of ``size`` lets through, never fewer than ``floor``."""
    return max(floor, math.floor(share * size + 1e-9))


def _node(req: PermitRequest) -> str:
    return req.node or req.device.pool


def _in_window(items: list[Observation], since: dt.datetime, **match: str) -> set[str]:
    return {o.incident_id for o in items if o.at >= since and all(getattr(o, k) == v for k, v in match.items())}


def prune(ledger: Ledger, policy: GuardPolicy, now: dt.datetime) -> None:
    """Forget observations older than every window that counts them."""
    keep = now - dt.timedelta(seconds=max(policy.window_s, policy.storm.window_s))
    ledger.seen = [o for o in ledger.seen if o.at >= keep]
    grants_from = now - dt.timedelta(seconds=policy.window_s)
    ledger.grants = [o for o in ledger.grants if o.at >= grants_from]


def evaluate(ledger: Ledger, req: PermitRequest, fleet: FleetSize | None, now: dt.datetime, *,
             shares: bool = True) -> PermitAnswer:
    """Whether ``req`` may go now, and if not which limit holds it (changes nothing).

    Without ``shares`` the driver and pool shares are not checked: the request adds no device to them
    (a node quarantine, whose failed devices count through their own incidents and whose node counts
    toward ``max_nodes_disrupted``), so they cannot be what holds it."""
    policy = req.policy
    if ledger.storm is not None:
        storm = ledger.storm
        return PermitAnswer(granted=False, limit="storm", storm=True,
                            detail=f"fleet guard tripped at {storm.tripped_at:%H:%M:%S}: {storm.summary}; every "
                                   f"disruptive step waits for `podmedic guard resume` or {policy.storm.clear_s:g}s "
                                   "of calm")
    if req.incident_id in ledger.permits:
        return PermitAnswer(granted=True, detail="holds a permit already")
    if req.override_by:
        return PermitAnswer(granted=True, detail=f"past the limits: approved by {req.override_by}")
    held = len(ledger.permits)
    if held + 1 > policy.max_devices_tainted:
        return PermitAnswer(granted=False, limit="devices_tainted",
                            detail=f"{held} devices under remediation; limit {policy.max_devices_tainted} at once")
    nodes = nodes_disrupted(ledger)
    if _node(req) not in nodes and len(nodes) + 1 > policy.max_nodes_disrupted:
        return PermitAnswer(granted=False, limit="nodes_disrupted",
                            detail=f"{len(nodes)} nodes disrupted; limit {policy.max_nodes_disrupted} at once")
    since = now - dt.timedelta(seconds=policy.window_s)
    driver, pool = req.device.driver, req.device.pool
    sizes = fleet or FleetSize()
    scopes = (("driver_share", f"{driver} devices", sizes.drivers.get(driver, 0), policy.max_driver_share,
               _in_window(ledger.grants, since, driver=driver)),
              ("pool_share", f"devices of pool {driver}/{pool}", sizes.pools.get(f"{driver}/{pool}", 0),
               policy.max_pool_share, _in_window(ledger.grants, since, driver=driver, pool=pool)))
    for limit, what, size, share, done in scopes if shares else ():
        if size <= 0:
            continue  # unknown denominator (no ResourceSlice): the at-once limits still hold
        room = allowed(share, size, policy.min_devices)
        # A device counts once per window: an incident that was granted before (its fence), gave
        # its permit back and asks again (its reschedule) is already among ``done``.
        if len(done - {req.incident_id}) + 1 > room:
            return PermitAnswer(granted=False, limit=limit,
                                detail=f"{len(done)} of {size} {what} remediated within {policy.window_s:g}s; "
                                       f"limit {share:.0%} ({room})")
    return PermitAnswer(granted=True, detail=f"within limits ({held + 1}/{policy.max_devices_tainted} devices, "
                                             f"{len(nodes | {_node(req)})}/{policy.max_nodes_disrupted} nodes)")


def observe(ledger: Ledger, req: PermitRequest, now: dt.datetime) -> None:
    """Count the asking device as unhealthy, once while its incident is open."""
    if req.incident_id not in ledger.counted:
        ledger.counted.append(req.incident_id)
        ledger.seen.append(_observation(req, now))


def sight(ledger: Ledger, sightings: list[Sighting], now: dt.datetime) -> int:
    """Count devices the ingest saw fail as unhealthy now, ahead of their incidents' asks; returns how
    many were new. An incident counted already, or seen within the kept observations, is not counted
    again (a device counts once toward a storm however it was seen: ``storm``)."""
    known = set(ledger.counted) | {o.incident_id for o in ledger.seen}
    new = 0
    for sighting in sightings:
        if sighting.incident_id in known:
            continue
        known.add(sighting.incident_id)
        device = sighting.device
        ledger.seen.append(Observation(incident_id=sighting.incident_id, driver=device.driver, pool=device.pool,
                                       node=sighting.node or device.pool, at=now))
        new += 1
    return new


def grant(ledger: Ledger, req: PermitRequest, now: dt.datetime, *, shares: bool = True) -> None:
    """Record that ``req``'s incident holds a permit from now on; with ``shares`` its device counts
    toward the driver and pool shares (a node incident's does not: its devices count through
    their own incidents, and counting the node too made a fully failed node one device over)."""
    if req.incident_id in ledger.permits:
        return
    ledger.permits[req.incident_id] = Permit(incident_id=req.incident_id, driver=req.device.driver,
                                             pool=req.device.pool, node=_node(req), since=now,
                                             override_by=req.override_by)
    if shares and all(o.incident_id != req.incident_id for o in ledger.grants):
        ledger.grants.append(_observation(req, now))
    unwait(ledger, req.incident_id)


def wait(ledger: Ledger, incident_id: str, now: dt.datetime) -> None:
    """Put a refused incident on the waiting list (once), remembering since when it waits."""
    if incident_id not in ledger.waiting:
        ledger.waiting.append(incident_id)
        ledger.waiting_since.setdefault(incident_id, now)


def unwait(ledger: Ledger, incident_id: str) -> None:
    """Take an incident off the waiting list."""
    if incident_id in ledger.waiting:
        ledger.waiting.remove(incident_id)
    ledger.waiting_since.pop(incident_id, None)


def release(ledger: Ledger, incident_id: str) -> bool:
    """Give back an incident's permit; True when it held one."""
    unwait(ledger, incident_id)
    if incident_id in ledger.counted:
        ledger.counted.remove(incident_id)
    return ledger.permits.pop(incident_id, None) is not None


def storm(ledger: Ledger, policy: GuardPolicy, fleet: FleetSize | None, now: dt.datetime) -> StormRecord | None:
    """The storm the recent observations make, if any (the worst driver's)."""
    rule = policy.storm
    if not rule.enabled or fleet is None:
        return None
    since = now - dt.timedelta(seconds=rule.window_s)
    if ledger.storms_since is not None and ledger.storms_since > since:
        since = ledger.storms_since
    recent = [o for o in ledger.seen if o.at >= since]
    worst: StormRecord | None = None
    for driver in sorted({o.driver for o in recent}):
        mine = list({o.incident_id: o for o in recent if o.driver == driver}.values())  # a device counts once
        size = fleet.drivers.get(driver, 0)
        if size <= 0 or len(mine) < rule.min_devices or len(mine) / size < rule.share:
            continue
        found = StormRecord(tripped_at=now, driver=driver, devices=sorted(o.incident_id for o in mine),
                            nodes=sorted({o.node for o in mine}), unhealthy=len(mine), fleet=size,
                            share=len(mine) / size, window_s=rule.window_s)
        if worst is None or found.share > worst.share:
            worst = found
    return worst


def _observation(req: PermitRequest, now: dt.datetime) -> Observation:
    return Observation(incident_id=req.incident_id, driver=req.device.driver, pool=req.device.pool,
                       node=_node(req), at=now)
