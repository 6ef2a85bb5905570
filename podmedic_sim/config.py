"""Settings of the cluster simulator: cluster shape and the durations that make it feel real.

Durations are in seconds and deliberately configurable, so tests run in fractions of a
second while the demo looks like a real fleet (image pulls, kubelet reports, back-off).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

RELEASE_OF_TAINT_RULES = {"v1": 37, "v1beta2": 36, "v1alpha3": 35, "none": 37}
"""The minor release each DeviceTaintRule version belongs to (KEP-5055: v1alpha3 in 1.35, v1beta2 in 1.36, v1
in 1.37)."""
GATE_DEFAULTS: dict[str, dict[int, bool]] = {
    # KEP-4680: alpha, off, through 1.35; beta, on, from 1.36. Off, pods carry no allocatedResourcesStatus.
    "ResourceHealthStatus": {35: False, 36: True, 37: True},
}
"""Default of each modelled feature gate per emulated minor release (pkg/features/kube_features.go)."""


class SimTimings(BaseModel):
    """How long simulated things take."""

    model_config = ConfigDict(extra="forbid")

    image_pull_s: float = Field(2.0, ge=0, description="Pull delay on a node lacking the image.")
    container_start_s: float = Field(0.2, ge=0, description="Container start after the image is present.")
    kubelet_report_s: float = Field(0.2, gt=0, description="How often the kubelet syncs pod status.")
    backoff_base_s: float = Field(0.5, ge=0, description="First crash-loop back-off; doubles per restart.")
    backoff_max_s: float = Field(10.0, ge=0, description="Crash-loop back-off ceiling.")
    job_backoff_max_s: float | None = Field(
        None, ge=0, description="The Job controller's pod-failure back-off ceiling (upstream 6 minutes against the "
        "kubelet's 5); unset: backoff_max_s.")
    scheduler_interval_s: float = Field(0.1, gt=0, description="How often pending pods are scheduled.")
    workload_step_s: float = Field(0.5, gt=0, description="Time per training step of a workload.")
    checkpoint_save_s: float = Field(0.3, ge=0, description="Time a workload takes to save a checkpoint.")
    crash_after_s: float = Field(
        0.1, ge=0, description="How long a container runs on a crashing device before it dies."
    )
    termination_grace_s: float = Field(
        0.2, ge=0, description="Time from a pod's deletionTimestamp until the kubelet removes it."
    )
    backoff_reset_s: float = Field(
        60.0, ge=0, description="Running this long without a crash resets a container's back-off."
    )
    job_requeue_s: float = Field(0.05, ge=0, description="Delay before the Job controller reacts.")
    progress_write_s: float = Field(
        1.0, gt=0, description="Least time between writes of a training Job's progress annotations."
    )
    eviction_interval_s: float = Field(
        0.1, gt=0, description="Delay before the device-taint eviction controller reacts."
    )
    node_monitor_grace_s: float = Field(
        0.5, ge=0, description="How long a node's kubelet may be silent before the node lifecycle controller "
        "marks it Unknown and taints it unreachable (kube-controller-manager --node-monitor-grace-period, 50 s)."
    )
    node_toleration_cap_s: float = Field(
        1.0, ge=0, description="The longest a pod's tolerationSeconds of an unreachable node is honoured before "
        "the taint eviction controller deletes it: the compressed stand-in for the default 300 s, as "
        "termination_grace_s is for the 30 s grace period."
    )
    orphan_gc_s: float = Field(
        40.0, ge=0, description="How long a Terminating pod bound to a node that does not exist waits before "
        "the pod garbage collector force-deletes it (quarantineTime, pkg/controller/podgc/gc_controller.go)."
    )


class DriverPlugin(BaseModel):
    """How one simulated DRA driver's kubelet plugin names its devices and what health it reports.

    The kubelet writes a device's ``resourceID`` in pod status as the first CDI device ID the
    driver returned from NodePrepareResources, and ``<driver>/<pool>/<device>`` only when it
    returned none (kubernetes/kubernetes pkg/kubelet/cm/dra/manager.go). Real drivers return CDI
    IDs: per device (dra-example-driver: ``k8s.<driver>/<class>=<claimUID>-<device>``) or one for
    all of a claim's devices (``nvidia.com/gpu=all``).
    """

    model_config = ConfigDict(extra="forbid")

    cdi_ids: Literal["none", "per-device", "shared"] = Field(
        "none",
        description="none: <driver>/<pool>/<device>; per-device: <kind>=<claimUID>-<device>; "
        "shared: <kind>=all for every device of the claim.",
    )
    cdi_kind: str = Field("", description="The CDI kind (vendor/class); empty: k8s.<driver>/device.")
    health_service: bool = Field(
        True,
        description="The driver serves the DRA health service (NodeWatchResources). Without it the kubelet "
        "has no health for the driver's devices and reports every one Unknown (pkg/kubelet/cm/dra/healthinfo.go, "
        "getHealthInfo), whatever befalls them.",
    )
    health_timeout_s: float = Field(
        30.0, gt=0,
        description="The health check timeout the plugin gives its devices (health_check_timeout_seconds; the "
        "kubelet's DefaultHealthTimeout is 30 s): a device not reported for longer is Unknown.",
    )
    health_messages: bool = Field(
        False,
        description="Fill ResourceHealth.message, as the kubelet does only with its ResourceHealthStatusMessage "
        "gate on and a driver that returns a message (k8s.io/api core/v1 ResourceHealth). Off: pod status says "
        "Unhealthy and nothing about what failed.",
    )


def _default_plugins() -> dict[str, DriverPlugin]:
    # NVIDIA's DRA driver returns CDI device IDs, so the kubelet reports those.
    return {"gpu.nvidia.com": DriverPlugin(cdi_ids="per-device")}


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
    node_pool_size: int = Field(16, ge=1, description="Nodes per value of the `sim.podmedic.io/pool` node label.")
    preloaded_images: list[str] = Field(default_factory=list, description="Images every node has before any pull.")
    image_size_bytes: int = Field(8_000_000_000, ge=0, description="Size reported for pulled images in node status.")
    checkpoint_every_steps: int = Field(
        0, ge=0, description="Training workloads checkpoint on their own every N steps (0: never)."
    )
    timings: SimTimings = Field(default_factory=SimTimings)
    plugins: dict[str, DriverPlugin] = Field(
        default_factory=_default_plugins,
        description="Per driver: how its kubelet plugin names devices in pod "
        "status (drivers not listed: <driver>/<pool>/<device>).",
    )
    device_plugins: dict[str, int] = Field(
        default_factory=dict,
        description="Extended resources a device plugin serves on every node, resource name -> devices per node "
        "(e.g. nvidia.com/gpu: 8): node capacity and allocatable, pods asking for them in their limits, and "
        "their health in allocatedResourcesStatus entries named after the resource.",
    )
    seed: int = Field(0, description="Seed for anything random (pod name suffixes, UUIDs of devices).")
    taint_rule_version: Literal["v1", "v1beta2", "v1alpha3", "none"] = Field(
        "v1",
        description="The resource.k8s.io version that serves DeviceTaintRule: v1 (Kubernetes 1.37), v1beta2 "
        "(1.36), v1alpha3 (1.35), or none (the DRADeviceTaints feature gate off). It sets the Kubernetes "
        "release the simulator emulates (/version, feature gate defaults).",
    )
    feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        description="Feature gates set away from the emulated release's default (see GATE_DEFAULTS).",
    )

    @field_validator("feature_gates")
    @classmethod
    def _known_gates(cls, gates: dict[str, bool]) -> dict[str, bool]:
        unknown = sorted(set(gates) - set(GATE_DEFAULTS))
        if unknown:
            raise ValueError(f"unrecognized feature gate(s) {', '.join(unknown)}; known: {', '.join(GATE_DEFAULTS)}")
        return gates

    @property
    def kubernetes_minor(self) -> int:
        """The minor release of Kubernetes the simulator emulates."""
        return RELEASE_OF_TAINT_RULES[self.taint_rule_version]

    def gate(self, name: str) -> bool:
        """Whether feature gate ``name`` is on in the emulated release."""
        return self.feature_gates.get(name, GATE_DEFAULTS[name][self.kubernetes_minor])
