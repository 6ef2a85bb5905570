"""How a driver's failed devices are handled: checkpoint, taint, the recovery ladder, closing."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator

from podmedic.domain.base import ConfigModel


class Effect(StrEnum):
    """DeviceTaintRule effects (resource.k8s.io/v1)."""

    NONE = "None"
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


class Checkpoint(ConfigModel):
    """Asking workloads to save state before anything disruptive."""

    enabled: bool = True
    timeout_s: float = Field(60.0, gt=0, description="Wait for acknowledgements at most this long.")
    poll_s: float = Field(0.5, gt=0, description="How often the acknowledgement is looked for.")
    whole_job: bool = Field(True, description="Also checkpoint the other pods of the affected pods' workload "
                                              "(Job, JobSet, StatefulSet, LeaderWorkerSet group...), together.")
    hang_s: float = Field(60.0, ge=0, description="Stop waiting once no pod reporting podmedic.io/progress has "
                                                  "moved for this long and none took the request up: the workload "
                                                  "is hung and cannot save (a synchronous job with a rank stuck on "
                                                  "the failed device). 0: always wait the whole timeout.")


class Taint(ConfigModel):
    """DeviceTaintRule effect by permanence."""

    transient: Effect = Effect.NO_SCHEDULE
    permanent: Effect = Effect.NO_EXECUTE

    def effect(self, permanent: bool) -> Effect:
        """The effect for a failure of this permanence."""
        return self.permanent if permanent else self.transient


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
    command: tuple[str, ...] = Field(
        default_factory=lambda: ("kill", "-s", "{signal}", "1"),
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

    transient: tuple[LadderRung, ...] = Field(
        default_factory=lambda: (
            LadderRung(action="in_place_restart", timeout_s=60),
            LadderRung(action="same_node", timeout_s=300),
            LadderRung(action="any_node", timeout_s=300),
        )
    )
    permanent: tuple[LadderRung, ...] = Field(
        default_factory=lambda: (
            LadderRung(action="same_node", timeout_s=300),
            LadderRung(action="any_node", timeout_s=300),
        )
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


class Maintenance(ConfigModel):
    """Announced maintenance of a node: act at the latest safe moment before its deadline
    (``podmedic/domain/maintenance.py``)."""

    enabled: bool = Field(True, description="Act on maintenance notices at all (off: the node goes at its deadline "
                                            "with its pods, as without podmedic).")
    lead_s: float = Field(120.0, ge=0, description="Kept before the deadline, after the checkpoint, for the move "
                                                   "itself: evictions and the replacements' start elsewhere.")
    back_s: float = Field(3600.0, gt=0, description="After the deadline, how long the node may take to be Ready "
                                                    "with the notice gone before the cordon is left to a person.")
    poll_s: float = Field(10.0, gt=0, description="How often the node is read while waiting for it to come back.")
