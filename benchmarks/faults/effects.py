"""Effects counted from outside podmedic, and a scenario's row of the table.

A duplicated effect is one the cluster or the vendor saw more often than an incident needs:
a DeviceTaintRule created (201) more than once for a device, a pod of the incident's Job
evicted (or exec-restarted) more than once, a ticket filed more than once for a device.
Counts come from the simulator's request ledger and the vendor desk's ticket list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.faults.harness import Harness, Incident


@dataclass
class Effects:
    """What one incident did to the cluster and the vendor."""

    device: str
    taint_rules_created: int
    recoveries: int
    tickets: int

    @property
    def duplicated(self) -> int:
        """Effects beyond the one each kind needs."""
        return sum(max(0, n - 1) for n in (self.taint_rules_created, self.recoveries, self.tickets))


def _ok(entry: dict[str, Any]) -> bool:
    return 200 <= int(entry["status"]) < 300


def count_effects(incident: Incident, ledger: list[dict[str, Any]], tickets: list[dict[str, Any]],
                  since: float) -> Effects:
    """The incident's effects: from ledger entries and tickets filed at or after ``since`` (epoch s)."""
    rules = sum(e["count"] for e in ledger if e["resource"] == "devicetaintrules" and e["verb"] == "create"
                and e["device"] == incident.device and _ok(e))
    recoveries = sum(e["count"] for e in ledger if e["resource"] == "pods" and e["subresource"] in ("eviction", "exec")
                     and e["verb"] == "create" and e["name"].startswith(f"{incident.job}-") and _ok(e))
    driver, pool, device = incident.device.split("/")
    filed = [t for t in tickets if t.get("created", 0) >= since
             and (t.get("evidence") or {}).get("device", {}) .get("device") == device
             and t["evidence"]["device"].get("pool") == pool and t["evidence"]["device"].get("driver") == driver]
    return Effects(incident.device, rules, recoveries, len(filed))


@dataclass
class ScenarioResult:
    """One row of the table."""

    scenario: str
    fault: str
    faults_injected: int = 0
    incidents: int = 0
    duplicated_effects: int = 0
    lost_events: int = 0
    completed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No duplicate, nothing lost, every incident completed as expected."""
        return self.duplicated_effects == 0 and self.lost_events == 0 and self.completed == self.incidents

    def as_json(self) -> dict[str, Any]:
        """The row with its details, for ``bench/results/faults.json``."""
        return {**asdict(self), "ok": self.ok}


def settle(result: ScenarioResult, incidents: list[Incident], ledger: list[dict[str, Any]],
           tickets: list[dict[str, Any]], since: float, attempts: dict[str, dict[str, int]]) -> ScenarioResult:
    """Fill the row's incident figures from the outcomes and the effects counted outside podmedic."""
    result.incidents += len(incidents)
    for incident in incidents:
        effects = count_effects(incident, ledger, tickets, since)
        outcome = incident.outcome.outcome.value if incident.outcome else None
        result.duplicated_effects += effects.duplicated
        # resolved_by_vendor is complete only with exactly one of each effect (one rule, one
        # reschedule, one ticket); a workload left unrecovered is not a completed incident.
        whole = incident.expect != "resolved_by_vendor" or (
            effects.taint_rules_created, effects.recoveries, effects.tickets) == (1, 1, 1)
        result.completed += outcome == incident.expect and whole
        if incident.run_id is None:  # the failure never opened an incident: the event was lost
            result.lost_events += 1
            result.notes.append(f"{incident.device}: no incident was opened after the device failed")
        result.details.append({
            "device": incident.device, "job": incident.job, "expected": incident.expect, "outcome": outcome,
            "explanation": incident.outcome.explanation[:300] if incident.outcome else "did not finish in time",
            **{k: v for k, v in asdict(effects).items() if k != "device"},
            "duplicated": effects.duplicated, "attempts": attempts.get(incident.device, {}),
        })
    return result


async def conclude(h: Harness, result: ScenarioResult, incidents: list[Incident], since: float,
                   timeout_s: float) -> ScenarioResult:
    """Wait for the incidents' outcomes, then count their effects and attempts."""
    await h.outcomes(incidents, timeout_s)
    attempts = {}
    for incident in incidents:
        try:
            attempts[incident.device] = await h.attempts(incident)
        except Exception as exc:  # a history that cannot be read is reported, not fatal
            result.notes.append(f"{incident.device}: history unreadable: {exc}")
    settle(result, incidents, await h.ledger(), await h.tickets(), since, attempts)
    for incident, detail in zip(incidents, result.details[-len(incidents):], strict=True):
        # More than one run for one failure means something reopened the incident (e.g. a stale event).
        detail["incident_runs"] = len(await h.runs(incident)) if incident.failed_at else 0
    return result
