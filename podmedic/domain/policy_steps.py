"""Per-step timeouts and retry policies of a driver's policy (``steps:``), as Temporal applies them."""

from __future__ import annotations

from pydantic import Field, model_validator

from podmedic.domain.base import ConfigModel

KUBE_REFUSALS = ("BadRequest", "InvalidObject", "Forbidden")
"""The Kubernetes errors (``podmedic/kube/errors.py``) no retry can mend: the request, the object or
the permission is wrong."""


class RetryPolicy(ConfigModel):
    """Temporal retry policy for one step's activity."""

    initial_interval_s: float = Field(1.0, gt=0, description="First retry delay.")
    backoff_coefficient: float = Field(2.0, ge=1, description="Growth of the delay per attempt.")
    max_interval_s: float = Field(30.0, gt=0, description="Ceiling of the retry delay.")
    max_attempts: int = Field(5, ge=0, description="Attempts in all; 0 retries without limit.")
    non_retryable_errors: tuple[str, ...] = Field(
        default_factory=lambda: (*KUBE_REFUSALS, "BadPolicy"),
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
