"""The ingest's sightings to the fleet guard when Temporal refuses a round trip: kept and sent with
the next (``workers/ingest/guard_sightings.py``). The client is a stand-in for this one function; the
round trips themselves run against a real server in ``tests/workflow/test_guard_sightings.py``."""

from __future__ import annotations

from typing import Any, cast

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain.models import DeviceRef
from podmedic.domain.policy_file import parse_policy
from tests.workflow.fakes import event
from workers.ingest.guard_sightings import GuardSightings

RULES = parse_policy("guard: {}\ndrivers:\n  default:\n    classification: {codes: {permanent: [79]}}\n")


class RefusesFirst:
    """``start_workflow`` that fails once, as an unreachable frontend does, then records the batches."""

    def __init__(self) -> None:
        self.calls = 0
        self.batches: list[list[str]] = []

    async def start_workflow(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RPCError("frontend unavailable", RPCStatusCode.UNAVAILABLE, b"")
        self.batches.append([s.incident_id for s in kwargs["start_signal_args"][0].sightings])


@pytest.mark.asyncio
async def test_a_refused_round_trip_keeps_its_devices_for_the_next() -> None:
    client = RefusesFirst()
    sightings = GuardSightings(cast(Client, client), "q", search_attributes=False)
    devices = [DeviceRef(driver="gpu.nvidia.com", pool=f"node-{n}", device="gpu-0") for n in range(2)]
    policy = RULES.for_driver("gpu.nvidia.com")
    with pytest.raises(RPCError):  # the delivery waiting on it fails with it, and its caller retries
        await sightings.tell(event(code=79, event_id="e0", device=devices[0]), policy)
    assert sightings.failed == 1 and sightings.waiting == 1
    assert await sightings.tell(event(code=79, event_id="e1", device=devices[1]), policy)
    assert sightings.told == 1 and sightings.waiting == 0
    assert client.batches == [[d.workflow_id for d in devices]]  # the refused device rode the next round trip
