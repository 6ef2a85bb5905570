"""How much training a fault cost, against the checkpoint podmedic asked for (from sim state).

The claim it checks: a training job hit by a fault loses no more progress than it made
since its podmedic-requested checkpoint. For every interruption of the job (a container of
it stopping) after a requested checkpoint, ``lost = step - checkpointed_step`` must be at
most ``step - requested_step``. ``podmedic`` commands print ``format_loss``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProgressLoss:
    """One training Job's interruptions and the steps they cost."""

    job: str
    step: int
    requested_step: int = -1
    interruptions: int = 0
    covered: int = 0  # interruptions after a podmedic-requested checkpoint
    lost_steps: int = 0  # lost in the covered interruptions
    since_requested: int = 0  # steps made after the requested checkpoint, at those interruptions
    uncovered_lost: int = 0  # lost in interruptions before any requested checkpoint
    holds: bool = True  # every covered interruption lost at most what it made since the request


def progress_loss(job: dict[str, Any]) -> ProgressLoss:
    """The figures of one entry of ``GET /sim/v1/state`` → ``jobs[]``."""
    covered = lost = since = uncovered = 0
    holds = True
    events = job.get("interruptions") or []
    for event in events:
        loss = int(event["lost"])
        if int(event["requested_step"]) < 0:
            uncovered += loss
            continue
        covered += 1
        made = int(event["step"]) - int(event["requested_step"])
        lost += loss
        since += made
        holds = holds and loss <= made
    return ProgressLoss(job=f"{job['namespace']}/{job['name']}", step=int(job["step"]),
                        requested_step=int(job.get("requested_step", -1)), interruptions=len(events),
                        covered=covered, lost_steps=lost, since_requested=since, uncovered_lost=uncovered,
                        holds=holds)


def format_loss(loss: ProgressLoss) -> str:
    """One line for a person, e.g. ``default/train: 1 interruption after podmedic's checkpoint ...``."""
    if not loss.covered:
        return (f"{loss.job}: {loss.interruptions} interruption(s), none after a podmedic-requested checkpoint "
                f"({loss.uncovered_lost} steps lost)")
    verdict = "holds" if loss.holds else "BROKEN"
    return (f"{loss.job}: {loss.covered} interruption(s) after podmedic's checkpoint at step {loss.requested_step}: "
            f"lost {loss.lost_steps} step(s), made {loss.since_requested} since the checkpoint "
            f"(bound lost <= made since checkpoint: {verdict})")
