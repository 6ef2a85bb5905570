"""How a driver's device failures are detected and classified (``detection:``, ``classification:``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from podmedic.domain.base import ConfigModel, FrozenMap


class Flapping(ConfigModel):
    """A device that keeps changing its mind is one incident, marked flapping."""

    transitions: int = Field(4, ge=2, description="Health changes within the window that make a device flap.")
    window_s: float = Field(600.0, gt=0, description="The window the transitions are counted in.")
    permanent: bool = Field(True, description="Treat a flapping device as permanently failed (taint hard, ticket).")


class NodeCorrelation(ConfigModel):
    """Several devices of one node failing together point at the node, not the devices."""

    devices: int = Field(3, ge=2, description="Distinct failed devices on one node that make a node incident.")
    window_s: float = Field(120.0, gt=0, description="The window the failures are counted in.")


class StormFence(ConfigModel):
    """Many devices of one driver failing at once (a power or fabric event): fence whole pools first.

    Once ``devices`` distinct devices of the driver are reported Unhealthy within ``window_s``, the
    ingest fences each pool with a failed device by one NoSchedule DeviceTaintRule that selects the
    driver and pool (``workflows/fleet/pool_fence.py``), ahead of the device incidents, which still open one
    per device and catch up behind it. The pool's rule stays until every failed device it was told of
    has a rule of its own or its incident closed, and at least ``min_hold_s``; never past ``max_hold_s``.
    Once fenced, at most ``acting`` of the storm's incidents go on at a time (``workflows/fleet/storm_turn_keeper.py``).
    """

    enabled: bool = Field(True, description="Fence pools in a storm at all.")
    devices: int = Field(50, ge=2, description="Distinct devices of the driver reported Unhealthy within "
                                               "window_s that make a storm.")
    window_s: float = Field(60.0, gt=0, description="The window the devices are counted in.")
    min_hold_s: float = Field(300.0, ge=0, description="A pool's rule stays at least this long after the last "
                                                       "failed device reported to it.")
    max_hold_s: float = Field(3600.0, gt=0, description="A pool's rule goes after this long whatever is "
                                                        "uncovered (the incidents fence their own devices).")
    poll_s: float = Field(15.0, gt=0, description="How soon the pool asks again whether its devices are covered; "
                                                  "each look that finds one uncovered doubles the wait, up to 8 "
                                                  "times this.")
    acting: int = Field(500, ge=1, description="How many of the driver's incidents opened in a storm act at once "
                                               "after their fence; the rest wait their turn, fenced. Keep it well "
                                               "under the workers' workflow cache, which holds node watches and "
                                               "pool fences too: past it nearly every step replays its incident.")


class PrepareFailures(ConfigModel):
    """Driver prepare failures (``FailedPrepareDynamicResources`` events), by message pattern.

    A message matching ``device_failed`` is a device fault; one matching ``bad_config``, or
    neither, is the pod's own configuration: reported on the pod, never tainted or retried.
    """

    device_failed: tuple[str, ...] = Field(
        default_factory=lambda: (r"(?i)unhealthy", r"(?i)\bxid\b", r"(?i)fallen off the bus",
                                 r"(?i)device (is )?(lost|not found|unavailable)", r"(?i)ecc"),
        description="Regular expressions (Python syntax) on the event message.",
    )
    bad_config: tuple[str, ...] = Field(
        default_factory=lambda: (r"(?i)invalid", r"(?i)unknown (config|parameter|field)",
                                 r"(?i)not supported", r"(?i)cannot (parse|decode)", r"(?i)opaque"),
        description="Regular expressions (Python syntax) on the event message.",
    )

    @field_validator("device_failed", "bad_config")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return patterns


SliceTaintMeaning = Literal["by_code", "transient", "permanent", "ignore"]


class Stall(ConfigModel):
    """A workload whose steps stop with no device saying why (a network hang, a collective stuck).

    Only pods that declare the progress protocol (``podmedic.io/reports-progress``) are watched, and a
    pod may set its own window with ``podmedic.io/stall-s`` (``0``: never judged): the trainer knows
    its step and save times best.
    """

    after_s: float = Field(300.0, ge=0, description="No reporting pod of the workload moved its "
                           "podmedic.io/progress for this long: it is hung (0: never judged). Below the "
                           "collective timeout (NCCL's default is 600 s), above the longest step or save.")
    grace_s: float = Field(30.0, ge=0, description="The ended rank's termination grace period: a hung process "
                           "does not act on SIGTERM, so this only bounds how long the kubelet waits.")
    verify_s: float = Field(900.0, gt=0, description="How long the workload has to move its steps again after "
                            "the rank ended (its controller's restart: scheduling, image, start-up).")


class Detection(ConfigModel):
    """When a signal becomes an incident, and how signals are grouped."""

    unknown_grace_s: float = Field(60.0, ge=0, description="How long Unknown health may last.")
    corroborate_s: float = Field(
        0.0, ge=0,
        description="How long an Unhealthy report that does not say what failed (pod status without the "
        "driver's message) waits for another source (node agent, DCGM alert, slice taint) that does, before "
        "it is classified by the default rule; 0: classify at once.")
    flapping: Flapping = Field(default_factory=Flapping)
    node_correlation: NodeCorrelation = Field(default_factory=NodeCorrelation)
    storm_fence: StormFence = Field(default_factory=StormFence)
    degradation: FrozenMap[float] = Field(
        validate_default=True,
        default_factory=lambda: {
            "ecc_correctable_per_hour": 100.0,
            "retired_pages": 48.0,
            "throttle_s": 300.0,
            "temperature_c": 90.0,
            "nvlink_errors_per_hour": 50.0,
        },
        description="Metric thresholds: a reading above any of them makes the device degraded.",
    )
    slice_taints: FrozenMap[SliceTaintMeaning] = Field(
        default_factory=dict, validate_default=True,
        description="ResourceSlice device taint keys written by the driver and what they mean; "
        "by_code reads the XID (or other) code from the taint value. Keys not listed are transient.",
    )
    infrastructure: tuple[str, ...] = Field(
        default_factory=lambda: (r"(?i)nvswitch", r"(?i)fabric manager", r"(?i)\bpower\b", r"(?i)node not ?ready"),
        description="Patterns on reason or message naming a fault outside the device (transient, node-scoped).",
    )
    prepare_failures: PrepareFailures = Field(default_factory=PrepareFailures)
    stall: Stall = Field(default_factory=Stall)

    @field_validator("infrastructure")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        return PrepareFailures._compiles(patterns)


class XidTable(ConfigModel):
    """Classification of NVIDIA XID (or any numeric driver) codes."""

    permanent: tuple[int, ...] = Field(default_factory=tuple, description="Device failed for good.")
    container_code: tuple[int, ...] = Field(default_factory=tuple, description="The workload's own fault.")
    ignore: tuple[int, ...] = Field(default_factory=tuple, description="Noise: never an incident.")


class Classification(ConfigModel):
    """How events of this driver are classified."""

    codes: XidTable = Field(default_factory=XidTable)
    unknown_code_permanence: Literal["transient", "permanent"] = "transient"
