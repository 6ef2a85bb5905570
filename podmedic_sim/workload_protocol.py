"""The annotations the simulated trainer speaks, and a training Job's progress.

The protocol's names come from ``podmedic.workload.protocol``, its one definition.
podmedic asks a training pod to checkpoint or restart through annotations and the pod
answers the same way (docs/simulator.md describes the protocol); the simulator keeps each
training Job's progress in a ``Progress`` and reports it in ``GET /sim/v1/state``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from podmedic.workload.protocol import ACK as CKPT_ACK
from podmedic.workload.protocol import CHECKPOINT_ID as CKPT_ID
from podmedic.workload.protocol import DEFAULT_PATH as DEFAULT_CKPT_PATH
from podmedic.workload.protocol import DEFAULT_PORT as DEFAULT_CKPT_PORT
from podmedic.workload.protocol import ERROR as CKPT_ERROR
from podmedic.workload.protocol import LOCATION as CKPT_LOCATION
from podmedic.workload.protocol import METHOD as CKPT_METHOD
from podmedic.workload.protocol import PATH as CKPT_PATH
from podmedic.workload.protocol import PORT as CKPT_PORT
from podmedic.workload.protocol import PROGRESS, REPORTS_PROGRESS, RESTART_EXIT_CODE, RESTART_REQUEST
from podmedic.workload.protocol import REQUEST as CKPT_REQUEST
from podmedic.workload.restart import DEFAULT_RESTART_EXIT_CODE

# The simulator's own annotations: what its trainer reports and how a test makes it answer.
TRAINING = "sim.podmedic.io/training"
STEP = "sim.podmedic.io/step"
CHECKPOINTED_STEP = "sim.podmedic.io/checkpointed-step"
LOST_STEPS = "sim.podmedic.io/lost-steps"
CKPT_ANSWER = "sim.podmedic.io/checkpoint-answer"  # ok (default) | never | fail | slow:<seconds>
# The trainer saves a checkpoint when it gets SIGTERM (exit 143) and the grace period lets it finish,
# as trainers that install a SIGTERM handler do (torchelastic, PyTorch Lightning's SIGTERM handling).
SIGTERM_CHECKPOINT = "sim.podmedic.io/checkpoint-on-sigterm"

__all__ = [
    "CHECKPOINTED_STEP",
    "CKPT_ACK",
    "CKPT_ANSWER",
    "CKPT_ERROR",
    "CKPT_ID",
    "CKPT_LOCATION",
    "CKPT_METHOD",
    "CKPT_PATH",
    "CKPT_PORT",
    "CKPT_REQUEST",
    "DEFAULT_CKPT_PATH",
    "DEFAULT_CKPT_PORT",
    "DEFAULT_RESTART_EXIT_CODE",
    "LOST_STEPS",
    "PROGRESS",
    "REPORTS_PROGRESS",
    "RESTART_EXIT_CODE",
    "RESTART_REQUEST",
    "SIGTERM_CHECKPOINT",
    "STEP",
    "TRAINING",
    "Progress",
]


@dataclass
class Progress:
    """A training Job's progress, as ``GET /sim/v1/state`` reports it."""

    namespace: str
    name: str
    parallelism: int = 1
    saves_on_sigterm: bool = False
    step: int = 0
    checkpointed_step: int = 0
    lost_steps: int = 0
    pods_created: int = 0
    checkpoints: int = 0
    restarts: int = 0  # container stops of any kind (crash, restart request, eviction)
    sigterm_checkpoints: int = 0  # saves made on SIGTERM that kept steps
    last_checkpoint_id: str = ""
    requested_step: int = -1  # step of the last checkpoint saved on request (podmedic), -1: none
    interruptions: list[dict[str, int]] = field(default_factory=list)
    stalled: bool = False  # a hung workload: Ready, but no step advances
    credit: float = 0.0  # part of the next step made (a slow rank makes less than one a tick)
    written: tuple[int, int, int] = (-1, -1, -1)
    last_write: float = float("-inf")

    def interrupt(self) -> None:
        """A container of the Job stopped: the steps since the last checkpoint are lost and rolled back."""
        self.restarts += 1
        self.interruptions.append({"step": self.step, "checkpointed_step": self.checkpointed_step,
                                   "requested_step": self.requested_step,
                                   "lost": self.step - self.checkpointed_step})
        self.lost_steps += self.step - self.checkpointed_step
        self.step = self.checkpointed_step

    def to_json(self) -> dict[str, Any]:
        """Fields of the state JSON."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "step": self.step,
            "checkpointed_step": self.checkpointed_step,
            "lost_steps": self.lost_steps,
            "pods_created": self.pods_created,
            "checkpoints": self.checkpoints,
            "restarts": self.restarts,
            "sigterm_checkpoints": self.sigterm_checkpoints,
            "last_checkpoint_id": self.last_checkpoint_id,
            "requested_step": self.requested_step,
            "interruptions": list(self.interruptions),
            "stalled": self.stalled,
        }
