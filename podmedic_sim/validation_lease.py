"""Lease (coordination.k8s.io/v1) rules the strict schema cannot express.

Upstream: kubernetes/kubernetes pkg/apis/coordination/validation/validation.go ``ValidateLeaseSpec``
(a duration must be positive, transitions not negative), and the MicroTime format of
``acquireTime``/``renewTime`` (apimachinery pkg/apis/meta/v1/micro_time.go: RFC 3339 with exactly
six fraction digits, ``2006-01-02T15:04:05.000000Z07:00``; Go's ``time.Parse`` refuses ``...:05Z``
and ``...:05.123Z`` for that layout). The real server refuses a bad time earlier, when decoding
(400 BadRequest); here it is one more Invalid cause.
"""

from __future__ import annotations

import datetime as dt
import re

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import Cause

MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


def _micro_time(value: object) -> bool:
    if not isinstance(value, str) or not MICRO_TIME.match(value):
        return False
    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def lease_causes(obj: Obj) -> list[Cause]:
    """Causes for a Lease whose spec the API server would refuse."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {duration}: must be greater than 0",
                            "spec.leaseDurationSeconds"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {transitions}: must be greater than or equal to 0",
                            "spec.leaseTransitions"))
    for field in ("acquireTime", "renewTime"):
        if spec.get(field) is not None and not _micro_time(spec[field]):
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {spec[field]!r}: not a MicroTime "
                                "(RFC 3339 with 6 fraction digits)", f"spec.{field}"))
    return causes
