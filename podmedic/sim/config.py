"""Settings of the cluster simulator: cluster shape and the durations that make it feel real.

Durations are in seconds and deliberately configurable, so tests run in fractions of a
second while the demo looks like a real fleet (image pulls, kubelet reports, back-off).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SimTimings(BaseModel):
    """How long simulated things take."""

    model_config = ConfigDict(extra="forbid")

    image_pull_s: float = Field(2.0, ge=0, description="Pull delay on a node lacking the image.")
    container_start_s: float = Field(0.2, ge=0, description="Container start after the image is present.")
    kubelet_report_s: float = Field(0.2, gt=0, description="How often the kubelet syncs pod status.")
    backoff_base_s: float = Field(0.5, ge=0, description="First crash-loop back-off; doubles per restart.")
    backoff_max_s: float = Field(10.0, ge=0, description="Crash-loop back-off ceiling.")
    scheduler_interval_s: float = Field(0.1, gt=0, description="How often pending pods are scheduled.")
    workload_step_s: float = Field(0.5, gt=0, description="Time per training step of a workload.")
    checkpoint_save_s: float = Field(0.3, ge=0, description="Time a workload takes to save a checkpoint.")


class SimConfig(BaseModel):
    """Shape of the simulated cluster."""

    model_config = ConfigDict(extra="forbid")

    nodes: int = Field(4, ge=0, description="Number of GPU nodes (node-0000, node-0001, ...).")
    devices_per_node: int = Field(8, ge=0, description="Devices per node and driver.")
    drivers: list[str] = Field(
        default_factory=lambda: ["gpu.nvidia.com"],
        min_length=1,
        description="DRA drivers; every node gets one ResourceSlice per driver.",
    )
    device_model: str = Field("H100-SXM5-80GB", description="Value of the `model` device attribute.")
    timings: SimTimings = Field(default_factory=SimTimings)
    seed: int = Field(0, description="Seed for anything random (pod name suffixes, UUIDs of devices).")
