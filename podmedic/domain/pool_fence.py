"""A storm's pool fence: one DeviceTaintRule over a whole resource pool, ahead of its devices' incidents.

In a hall-wide event thousands of devices fail within seconds; one incident per device cannot
start and fence them all within a minute. The ingest sees the storm first (the driver's
``detection.storm_fence``) and fences every pool with a failed device by one NoSchedule rule
that selects the driver and pool (a per-node pool: a node's devices). The device incidents still
open, one per device, and fence their own devices; the pool's rule goes once they have
(``workflows/fleet/pool_fence.py``).
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from podmedic.domain.models import DeviceRef, DriverName, PoolName, TimelineEntry, object_name
from podmedic.domain.policy_detection import StormFence


class PoolRef(BaseModel):
    """One resource pool of one driver, as a DeviceTaintRule's selector names it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    driver: DriverName
    pool: PoolName

    @property
    def workflow_id(self) -> str:
        """The pool fence's workflow id: one fence per pool at a time."""
        return f"pool/{self.driver}/{self.pool}"

    @property
    def rule_name(self) -> str:
        """The pool's DeviceTaintRule (a name no device's rule can take: ``podmedic-pool-``)."""
        return object_name("podmedic-pool", f"{self.driver}/{self.pool}")

    @classmethod
    def of(cls, device: DeviceRef) -> PoolRef:
        """The pool ``device`` belongs to."""
        return cls(driver=device.driver, pool=device.pool)


class PoolFenceInput(BaseModel):
    """Start a pool's fence: which pool, the driver's storm rule, and why (what the ingest counted)."""

    pool: PoolRef
    policy: StormFence
    why: str
    search_attributes: bool = Field(True, description="Started with podmedic's search attributes: the phase is "
                                                      "kept up to date.")


class PoolFenceReport(BaseModel):
    """Failed devices of the pool the ingest saw (the fence's signal; the start carries the first)."""

    devices: list[DeviceRef]
    observed_at: dt.datetime


class PoolFenceState(BaseModel):
    """What the fence is doing, for the UI and the CLI."""

    pool: PoolRef
    rule_name: str = ""
    devices: list[str] = Field(default_factory=list, description="Failed devices reported to the fence.")
    uncovered: list[str] = Field(default_factory=list, description="Those with neither a rule of their own nor "
                                                                    "a closed incident, at the last look.")
    released: bool = False
    timeline: list[TimelineEntry] = Field(default_factory=list)


class PoolRuleInput(BaseModel):
    """Create the pool's rule (``fence_pool``) or let it go (``unfence_pool``)."""

    pool: PoolRef
    reason: str


class PoolDevicesInput(BaseModel):
    """Which of these devices have no DeviceTaintRule of their own yet."""

    devices: list[DeviceRef]
