"""Classification of a health event into failure mode and permanence, per driver policy.

Pure functions of the event and the policy: the workflow calls them, so they must stay
deterministic (no I/O, no clocks).
"""

from __future__ import annotations

from pydantic import BaseModel

from podmedic.models import DeviceHealthEvent, FailureMode, Health, Permanence
from podmedic.policy import DriverPolicy


class Verdict(BaseModel):
    """What the pipeline should believe about a failure, and why."""

    failure_mode: FailureMode
    permanence: Permanence
    actionable: bool
    why: str


def classify(event: DeviceHealthEvent, policy: DriverPolicy) -> Verdict:
    """Classify ``event`` by the driver's code table; unknown codes use the policy default."""
    codes = policy.classification.codes
    code = event.code
    if event.health is Health.HEALTHY:
        return Verdict(
            failure_mode=FailureMode.DEVICE_DEGRADED,
            permanence=Permanence.TRANSIENT,
            actionable=False,
            why="device reported Healthy",
        )
    if code is not None:
        # (codes, failure mode, permanence, actionable, why): the driver's table, first match wins.
        table = (
            (codes.ignore, FailureMode.CONTAINER_CODE, Permanence.TRANSIENT, False, "is on the ignore list"),
            (codes.container_code, FailureMode.CONTAINER_CODE, Permanence.TRANSIENT, True,
             "is caused by the workload, not the device"),
            (codes.permanent, FailureMode.DEVICE_FAILED, Permanence.PERMANENT, True, "is a permanent device failure"),
        )
        for listed, mode, permanence, actionable, why in table:
            if code in listed:
                return Verdict(failure_mode=mode, permanence=permanence, actionable=actionable,
                               why=f"code {code} {why} ({policy.driver} table)")
    permanence = Permanence(policy.classification.unknown_code_permanence)
    reason = f"code {code} is not in {policy.driver}'s table" if code is not None else "no code"
    mode = FailureMode.DEVICE_DEGRADED if event.health is Health.UNKNOWN else FailureMode.DEVICE_FAILED
    return Verdict(
        failure_mode=mode,
        permanence=permanence,
        actionable=True,
        why=f"{event.health.value}: {reason}; treated as {permanence.value} by policy",
    )
