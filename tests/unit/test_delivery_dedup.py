"""The ingest's dedup key: a repeat is the same state of the same device under the same pod."""

from __future__ import annotations

import datetime as dt

from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, PodKey
from workers.ingest.delivery import Deliverer


def _event(uid: str | None, code: int = 94) -> DeviceHealthEvent:
    return DeviceHealthEvent(
        device=DeviceRef(driver="gpu.nvidia.com", pool="node-0000", device="gpu-0"), health=Health.UNHEALTHY,
        reason="XidError", code=code, message="XID 94", source="pod-status", event_id=f"e-{uid}-{code}",
        observed_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        pod=PodKey(namespace="default", name=f"p-{uid}", uid=uid) if uid else None)


def test_the_same_state_under_the_same_pod_is_a_repeat() -> None:
    assert Deliverer._key(_event("a")) == Deliverer._key(_event("a"))
    assert Deliverer._key(_event(None)) == Deliverer._key(_event(None))


def test_a_new_pod_on_a_repaired_device_is_not_a_repeat() -> None:
    # The device was repaired while no pod used it, so the ingest never saw it Healthy;
    # the next pod's report of the same fault must reach Temporal and open a new incident.
    assert Deliverer._key(_event("a")) != Deliverer._key(_event("b"))
    assert Deliverer._key(_event("a")) != Deliverer._key(_event("a", code=79))
