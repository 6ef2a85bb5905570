"""Per-DRA-driver policy: how podmedic detects, classifies and remediates each driver's devices.

The file is YAML, keyed by driver name under ``drivers:``, with a ``default`` entry. A
driver's entry is laid over ``default`` key by key, so it lists only what differs. Every
resolved driver policy is validated in full; errors name the field path and the reason.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from podmedic.domain.base import ConfigModel
from podmedic.domain.fleet_guard.policy import GuardPolicy
from podmedic.domain.ticket_policy import Ticket


class RetryPolicy(ConfigModel):
    """Temporal retry policy for one step's activity."""

    initial_interval_s: float = Field(1.0, gt=0, description="First retry delay.")
    backoff_coefficient: float = Field(2.0, ge=1, description="Growth of the delay per attempt.")
    max_interval_s: float = Field(30.0, gt=0, description="Ceiling of the retry delay.")
    max_attempts: int = Field(5, ge=0, description="Attempts in all; 0 retries without limit.")
    non_retryable_errors: list[str] = Field(
        default_factory=lambda: ["InvalidObject", "Forbidden", "BadPolicy"],
        description="Error types that fail the step at once.",
    )

    @model_validator(mode="after")
    def _interval_order(self) -> RetryPolicy:
        if self.max_interval_s < self.initial_interval_s:
            raise ValueError("max_interval_s must be >= initial_interval_s")
        return self


class StepPolicy(ConfigModel):
    """Timeouts and retries of one pipeline step, turned into Temporal activity options."""

    start_to_close_s: float = Field(30.0, gt=0, description="Limit of one attempt.")
    heartbeat_s: float | None = Field(None, gt=0, description="Heartbeat timeout for long waits.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy)


class StepPolicies(ConfigModel):
    """One ``StepPolicy`` per activity of the pipeline."""

    discover: StepPolicy = Field(default_factory=StepPolicy)
    checkpoint: StepPolicy = Field(default_factory=lambda: StepPolicy(start_to_close_s=120, heartbeat_s=10))
    taint: StepPolicy = Field(default_factory=StepPolicy)
    recover: StepPolicy = Field(default_factory=lambda: StepPolicy(start_to_close_s=600, heartbeat_s=10))
    ticket: StepPolicy = Field(default_factory=StepPolicy)
    close: StepPolicy = Field(default_factory=StepPolicy)


class Effect(StrEnum):
    """DeviceTaintRule effects (resource.k8s.io/v1)."""

    NONE = "None"
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


class Flapping(ConfigModel):
    """A device that keeps changing its mind is one incident, marked flapping."""

    transitions: int = Field(4, ge=2, description="Health changes within the window that make a device flap.")
    window_s: float = Field(600.0, gt=0, description="The window the transitions are counted in.")
    permanent: bool = Field(True, description="Treat a flapping device as permanently failed (taint hard, ticket).")


class NodeCorrelation(ConfigModel):
    """Several devices of one node failing together point at the node, not the devices."""

    devices: int = Field(3, ge=2, description="Distinct failed devices on one node that make a node incident.")
    window_s: float = Field(120.0, gt=0, description="The window the failures are counted in.")


class PrepareFailures(ConfigModel):
    """Driver prepare failures (``FailedPrepareDynamicResources`` events), by message pattern.

    A message matching ``device_failed`` is a device fault; one matching ``bad_config``, or
    neither, is the pod's own configuration: reported on the pod, never tainted or retried.
    """

    device_failed: list[str] = Field(
        default_factory=lambda: [r"(?i)unhealthy", r"(?i)\bxid\b", r"(?i)fallen off the bus",
                                 r"(?i)device (is )?(lost|not found|unavailable)", r"(?i)ecc"],
        description="Regular expressions (Python syntax) on the event message.",
    )
    bad_config: list[str] = Field(
        default_factory=lambda: [r"(?i)invalid", r"(?i)unknown (config|parameter|field)",
                                 r"(?i)not supported", r"(?i)cannot (parse|decode)", r"(?i)opaque"],
        description="Regular expressions (Python syntax) on the event message.",
    )

    @field_validator("device_failed", "bad_config")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return patterns


SliceTaintMeaning = Literal["by_code", "transient", "permanent", "ignore"]


class Detection(ConfigModel):
    """When a signal becomes an incident, and how signals are grouped."""

    unknown_grace_s: float = Field(60.0, ge=0, description="How long Unknown health may last.")
    flapping: Flapping = Field(default_factory=Flapping)
    node_correlation: NodeCorrelation = Field(default_factory=NodeCorrelation)
    degradation: dict[str, float] = Field(
        default_factory=lambda: {
            "ecc_correctable_per_hour": 100.0,
            "retired_pages": 48.0,
            "throttle_s": 300.0,
            "temperature_c": 90.0,
            "nvlink_errors_per_hour": 50.0,
        },
        description="Metric thresholds: a reading above any of them makes the device degraded.",
    )
    slice_taints: dict[str, SliceTaintMeaning] = Field(
        default_factory=dict,
        description="ResourceSlice device taint keys written by the driver and what they mean; "
        "by_code reads the XID (or other) code from the taint value. Keys not listed are transient.",
    )
    infrastructure: list[str] = Field(
        default_factory=lambda: [r"(?i)nvswitch", r"(?i)fabric manager", r"(?i)\bpower\b", r"(?i)node not ?ready"],
        description="Patterns on reason or message naming a fault outside the device (transient, node-scoped).",
    )
    prepare_failures: PrepareFailures = Field(default_factory=PrepareFailures)

    @field_validator("infrastructure")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        return PrepareFailures._compiles(patterns)


class XidTable(ConfigModel):
    """Classification of NVIDIA XID (or any numeric driver) codes."""

    permanent: list[int] = Field(default_factory=list, description="Device failed for good.")
    container_code: list[int] = Field(default_factory=list, description="The workload's own fault.")
    ignore: list[int] = Field(default_factory=list, description="Noise: never an incident.")


class Classification(ConfigModel):
    """How events of this driver are classified."""

    codes: XidTable = Field(default_factory=XidTable)
    unknown_code_permanence: Literal["transient", "permanent"] = "transient"


class Checkpoint(ConfigModel):
    """Asking workloads to save state before anything disruptive."""

    enabled: bool = True
    timeout_s: float = Field(60.0, gt=0, description="Wait for acknowledgements at most this long.")
    poll_s: float = Field(0.5, gt=0, description="How often the acknowledgement is looked for.")
    whole_job: bool = Field(True, description="Also checkpoint the other pods of the affected pods' Jobs, together.")


class Taint(ConfigModel):
    """DeviceTaintRule effect by permanence."""

    transient: Effect = Effect.NO_SCHEDULE
    permanent: Effect = Effect.NO_EXECUTE


Rung = Literal[
    "in_place_restart",
    "same_node",
    "any_node",
    "node_quarantine",
]


class LadderRung(ConfigModel):
    """One rung of the recovery ladder."""

    action: Rung
    attempts: int = Field(1, ge=1, le=10)
    timeout_s: float = Field(120.0, gt=0, description="Verification must pass within this.")


InPlaceMechanism = Literal["exit_code", "exec_signal", "restart_all_containers"]
_SIGNALS = {"HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "USR1": 10, "USR2": 12, "TERM": 15}


class InPlace(ConfigModel):
    """How a container is restarted in place (pod UID and device allocation kept).

    ``exit_code``: podmedic annotates ``podmedic.io/restart-request``; the workload exits with
    its ``podmedic.io/restart-exit-code``, which its ``restartPolicyRules`` (KEP-5307) restart.
    ``exec_signal``: podmedic execs ``command`` (``{signal}`` is replaced) in the container
    through pods/exec; the process dies of the signal (exit code 128+N) and the container's
    restart rules or policy restart it. ``restart_all_containers``: as ``exit_code``, but the
    rule's action is ``RestartAllContainers`` (KEP-5532) and every container must restart.
    """

    mechanism: InPlaceMechanism = "exit_code"
    signal: str = Field("TERM", description="Signal name for exec_signal: " + ", ".join(_SIGNALS))
    command: list[str] = Field(
        default_factory=lambda: ["kill", "-s", "{signal}", "1"],
        min_length=1,
        description="What exec_signal runs in the container; {signal} is replaced by the signal name.",
    )

    @field_validator("signal")
    @classmethod
    def _known_signal(cls, signal: str) -> str:
        name = signal.upper().removeprefix("SIG")
        if name not in _SIGNALS:
            raise ValueError(f"unknown signal {signal!r}; one of {', '.join(_SIGNALS)}")
        return name

    @property
    def signal_exit_code(self) -> int:
        """The exit code of a process killed by ``signal`` (128 + its number)."""
        return 128 + _SIGNALS[self.signal]


class Eviction(ConfigModel):
    """Evictions a PodDisruptionBudget blocks (429) are retried this way, then the rung fails."""

    retry_s: float = Field(5.0, gt=0, description="Wait between eviction attempts.")
    max_wait_s: float = Field(120.0, ge=0, description="Give up (the rung fails) after this long blocked.")


class Recovery(ConfigModel):
    """Escalation ladders by permanence, tried in order until one verifies."""

    transient: list[LadderRung] = Field(
        default_factory=lambda: [
            LadderRung(action="in_place_restart", timeout_s=60),
            LadderRung(action="same_node", timeout_s=300),
            LadderRung(action="any_node", timeout_s=300),
        ]
    )
    permanent: list[LadderRung] = Field(
        default_factory=lambda: [
            LadderRung(action="same_node", timeout_s=300),
            LadderRung(action="any_node", timeout_s=300),
        ]
    )
    verify_poll_s: float = Field(0.5, gt=0, description="How often verification looks.")
    in_place: InPlace = Field(default_factory=InPlace)
    eviction: Eviction = Field(default_factory=Eviction)
    verify_progress: bool = Field(
        True, description="Pods declaring podmedic.io/reports-progress must move past their "
        "podmedic.io/progress value at the restart before a rung verifies.",
    )


class Close(ConfigModel):
    """When the taint comes off."""

    heal_wait_s: float = Field(600.0, ge=0, description="Wait for the device to heal by itself.")
    anti_flap_s: float = Field(60.0, ge=0, description="Healthy this long before untainting.")
    poll_s: float = Field(5.0, gt=0, description="How often device health is read.")


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

    gates: list[Gate] = Field(default_factory=list, description="Gated actions; empty: nothing waits.")
    timeout_s: float = Field(3600.0, gt=0, description="How long a gate waits for an operator.")
    on_timeout: OnTimeout = Field("abort", description="What an unanswered gate does: proceed or abort.")

    @field_validator("gates")
    @classmethod
    def _one_gate_per_action(cls, gates: list[Gate]) -> list[Gate]:
        actions = [g.action for g in gates]
        twice = sorted({a for a in actions if actions.count(a) > 1})
        if twice:
            raise ValueError(f"action(s) gated more than once: {', '.join(twice)}")
        return gates

    def gate_for(self, action: str) -> Gate | None:
        """The gate on ``action``, if the policy has one."""
        return next((g for g in self.gates if g.action == action), None)


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
    dry_run: bool = Field(False, description="Record every decision; change nothing in the cluster and file no "
                                             "ticket (the file's guard.dry_run sets it for every driver).")
    guard: GuardPolicy | None = Field(None, description="The file's top-level guard: section, copied in by the "
                                                        "loader; None (no section): incidents ask no guard.")
