"""Per-DRA-driver policy: how podmedic detects, classifies and remediates each driver's devices.

The file is YAML, keyed by driver name under ``drivers:``, with a ``default`` entry. A
driver's entry is laid over ``default`` key by key, so it lists only what differs. Every
resolved driver policy is validated in full; errors name the field path and the reason.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from podmedic.domain.base import ConfigModel
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.policy_detection import Classification, Detection
from podmedic.domain.policy_recovery import Checkpoint, Close, Maintenance, Recovery, Taint
from podmedic.domain.policy_steps import StepPolicies
from podmedic.domain.ticket_policy import Ticket

GateAction = Literal["checkpoint", "taint", "taint_no_execute", "in_place_restart", "same_node", "ticket",
                     "any_node", "node_quarantine"]
OnTimeout = Literal["proceed", "abort"]


class Gate(ConfigModel):
    """One action that waits for an operator's approval before podmedic takes it.

    ``taint_no_execute`` gates only NoExecute taints (they evict running pods); ``taint``
    gates every taint. The recovery rungs are gated by their action name.
    """

    action: GateAction
    timeout_s: float | None = Field(None, gt=0, description="Wait this long; default: approvals.timeout_s.")
    on_timeout: OnTimeout | None = Field(None, description="proceed or abort; default: approvals.on_timeout.")


class Approvals(ConfigModel):
    """Approval gates: actions an operator must approve (``podmedic incidents approve``)."""

    gates: tuple[Gate, ...] = Field(default_factory=tuple, description="Gated actions; empty: nothing waits.")
    timeout_s: float = Field(3600.0, gt=0, description="How long a gate waits for an operator.")
    on_timeout: OnTimeout = Field("abort", description="What an unanswered gate does: proceed or abort.")

    @field_validator("gates")
    @classmethod
    def _one_gate_per_action(cls, gates: tuple[Gate, ...]) -> tuple[Gate, ...]:
        actions = [g.action for g in gates]
        twice = sorted({a for a in actions if actions.count(a) > 1})
        if twice:
            raise ValueError(f"action(s) gated more than once: {', '.join(twice)}")
        return gates

    def gate_for(self, action: str) -> Gate | None:
        """The gate on ``action``, if the policy has one."""
        return next((g for g in self.gates if g.action == action), None)

    def gate_holding(self, step: str, *, no_execute: bool = False) -> Gate | None:
        """The gate holding ``step``: its own, or for a NoExecute taint (``no_execute``) ``taint_no_execute``."""
        gate = self.gate_for(step)
        if gate is None and step == "taint" and no_execute:
            gate = self.gate_for("taint_no_execute")
        return gate


class NodeQuarantine(ConfigModel):
    """What a node incident does to its node: cordon it and taint it, until its devices heal.

    A ``NoExecute`` taint evicts every pod on the node without a toleration, so it always
    waits for an operator's approval, gated or not.
    """

    enabled: bool = Field(True, description="Quarantine the node when it becomes a node incident.")
    cordon: bool = Field(True, description="Set spec.unschedulable (kubectl cordon).")
    taint_key: str = Field("podmedic.io/node-quarantine", min_length=1, max_length=253,
                           description="Key of the node taint podmedic adds.")
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule"] = Field(
        "NoSchedule", description="Effect of the node taint; NoExecute always waits for approval.")
    hold_s: float = Field(86400.0, gt=0, description="Wait this long for the devices to heal; then close, "
                                                     "keeping the quarantine for an operator.")
    poll_s: float = Field(30.0, gt=0, description="How often the device incidents are looked at.")


class RepeatOffenders(ConfigModel):
    """A device with this many incidents (the new one included) within the window is a lemon:
    treated as permanently failed (NoExecute taint, no in-place restart) and ticketed."""

    incidents: int = Field(0, ge=0, description="K incidents in the window make a repeat offender; 0 turns it off.")
    window_s: float = Field(604800.0, gt=0, description="The window the device's incidents are counted in.")

    @field_validator("incidents")
    @classmethod
    def _at_least_two(cls, incidents: int) -> int:
        if incidents == 1:
            raise ValueError("1 would make every incident a repeat offender; use 0 (off) or at least 2")
        return incidents


class DriverPolicy(ConfigModel):
    """Everything podmedic does for one DRA driver's devices."""

    driver: str = Field("default", description="Driver this policy was resolved for.")
    detection: Detection = Field(default_factory=Detection)
    classification: Classification = Field(default_factory=Classification)
    steps: StepPolicies = Field(default_factory=StepPolicies)
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    taint: Taint = Field(default_factory=Taint)
    recovery: Recovery = Field(default_factory=Recovery)
    ticket: Ticket = Field(default_factory=Ticket)
    close: Close = Field(default_factory=Close)
    approvals: Approvals = Field(default_factory=Approvals)
    node_quarantine: NodeQuarantine = Field(default_factory=NodeQuarantine)
    repeat_offenders: RepeatOffenders = Field(default_factory=RepeatOffenders)
    maintenance: Maintenance = Field(default_factory=Maintenance)
    dry_run: bool = Field(False, description="Record every decision; change nothing in the cluster and file no "
                                             "ticket (the file's guard.dry_run sets it for every driver).")
    guard: GuardPolicy | None = Field(None, description="The file's top-level guard: section, copied in by the "
                                                        "loader; None (no section): incidents ask no guard.")
