"""Runtime records of the simulated kubelet and how they render into ``pod.status``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.config import DriverPlugin
from podmedic_sim.devices import DeviceRegistry, DevKey
from podmedic_sim.store import now_rfc3339

PodKey = tuple[str, str]
OWN_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)


@dataclass
class ContainerRt:
    """One container as the runtime sees it."""

    name: str
    image: str
    claim_refs: list[dict[str, str]]
    restart_policy: str
    rules: list[dict[str, Any]]
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    container_id: str = ""
    started_at: str | None = None
    started_mono: float = 0.0
    exit_code: int | None = None
    term_reason: str = ""
    finished_at: str | None = None
    last_terminated: dict[str, Any] | None = None
    restart_count: int = 0
    crashes: int = 0  # consecutive, for back-off
    gen: int = 0  # bumps on every transition; stale timers compare it
    hung: bool = False  # the process is stuck (in a CUDA call): it neither steps nor dies of its device

    def bump(self) -> int:
        """Invalidate timers armed for the previous state; returns the new generation."""
        self.gen += 1
        return self.gen

    def new_id(self) -> None:
        """A fresh container ID, as a container runtime hands out per start."""
        self.container_id = f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}"

    def terminated_json(self) -> dict[str, Any]:
        """The ``terminated`` state block of the current (dead) instance."""
        return {
            "exitCode": self.exit_code if self.exit_code is not None else 0,
            "reason": self.term_reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "containerID": self.container_id,
        }


@dataclass
class PodRt:
    """A pod the kubelet runs on its node."""

    key: PodKey
    uid: str
    node: str
    restart_policy: str
    containers: list[ContainerRt]
    devices: list[tuple[str, str, DevKey]] = field(default_factory=list)  # (claim obj, request, dev)
    pod_claims: dict[str, str] = field(default_factory=dict)  # claim object name -> name in pod
    claim_uids: dict[str, str] = field(default_factory=dict)  # claim object name -> its uid
    phase: str = "Pending"
    start_time: str = field(default_factory=now_rfc3339)
    host_ip: str = ""
    pod_ip: str = ""
    deleting: bool = False
    gone: bool = False
    prepare_failures: int = 0  # consecutive failed attempts to prepare the devices, for back-off
    lost: list[str] = field(default_factory=list)  # containers that died with their node, until it is back

    def container(self, name: str) -> ContainerRt | None:
        """The container of that name."""
        return next((c for c in self.containers if c.name == name), None)

    def ready(self) -> bool:
        """Running with every container running."""
        return self.phase == "Running" and not self.deleting and all(c.state == "running" for c in self.containers)

    def container_devices(self, c: ContainerRt) -> list[tuple[str, str, DevKey]]:
        """Devices of the claims (and requests) the container references."""
        out = []
        for claim, request, dev in self.devices:
            pod_name = self.pod_claims.get(claim, claim)
            for ref in c.claim_refs:
                if ref.get("name") == pod_name and (not ref.get("request") or ref["request"] == request):
                    out.append((pod_name, request, dev))
                    break
        return out


def _state_json(c: ContainerRt) -> dict[str, Any]:
    if c.state == "running":
        return {"running": {"startedAt": c.started_at}}
    if c.state == "terminated":
        return {"terminated": c.terminated_json()}
    waiting: dict[str, Any] = {"reason": c.reason}
    if c.message:
        waiting["message"] = c.message
    return {"waiting": waiting}


ExtendedStatus = Callable[[str, str], list[dict[str, Any]]]
"""(pod UID, container) -> its device-plugin ``allocatedResourcesStatus`` entries."""

UNLISTED = DriverPlugin()
"""The plugin of a driver ``SimConfig.plugins`` does not list."""


def resource_id(dev: DevKey, claim_uid: str, plugin: DriverPlugin | None) -> str:
    """The ``resourceID`` the kubelet writes for a device: the driver's first CDI device ID, or
    ``<driver>/<pool>/<device>`` when the driver returned none."""
    if plugin is None or plugin.cdi_ids == "none":
        return "/".join(dev)
    kind = plugin.cdi_kind or f"k8s.{dev[0]}/device"
    return f"{kind}=all" if plugin.cdi_ids == "shared" else f"{kind}={claim_uid}-{dev[2]}"


def allocated_resources_status(
    rt: PodRt, c: ContainerRt, devices: DeviceRegistry, plugins: dict[str, DriverPlugin]
) -> list[dict[str, Any]]:
    """KEP-4680 ``allocatedResourcesStatus`` as the kubelet writes it (pkg/kubelet/cm/dra/manager.go,
    ``UpdateAllocatedResourcesStatus``): per claim the container references, an entry named
    ``claim:<name>``, or ``claim:<name>/<request>`` when the reference names a request, listing the
    devices of that claim, one element per resourceID: of devices sharing one CDI ID only the first
    is listed (the kubelet skips a resourceID it already added). A driver without the health service
    has every device Unknown (``healthinfo.go``: a device never reported is Unknown)."""
    out: list[dict[str, Any]] = []
    for ref in c.claim_refs:
        pod_claim, request = ref.get("name", ""), ref.get("request") or ""
        entries: list[dict[str, str]] = []
        listed: set[str] = set()
        for claim, _, dev in rt.devices:
            if rt.pod_claims.get(claim, claim) != pod_claim:
                continue
            plugin = plugins.get(dev[0]) or UNLISTED  # a driver not configured behaves as the defaults say
            rid = resource_id(dev, rt.claim_uids.get(claim, ""), plugin)
            if rid in listed:
                continue
            listed.add(rid)
            fault = devices.fault(dev)
            reporting = plugin.health_service and (
                devices.streams is None or devices.streams.reported(dev, plugin.health_timeout_s))
            entry = {"resourceID": rid, "health": fault.health if reporting else "Unknown"}
            if reporting and plugin.health_messages and (fault.message or fault.reason):
                entry["message"] = fault.message or fault.reason
            entries.append(entry)
        if entries:
            name = f"claim:{pod_claim}/{request}" if request else f"claim:{pod_claim}"
            out.append({"name": name, "resources": entries})
    return out


def container_status(
    rt: PodRt, c: ContainerRt, devices: DeviceRegistry, plugins: dict[str, DriverPlugin],
    extended: ExtendedStatus | None = None, health: bool = True,
) -> dict[str, Any]:
    """One ``containerStatuses`` entry, with KEP-4680 ``allocatedResourcesStatus`` (only with the
    ResourceHealthStatus gate on, ``health``): the DRA claims' entries, then the device plugins'
    (``extended``, from the device manager)."""
    status: dict[str, Any] = {
        "name": c.name,
        "image": c.image,
        "imageID": f"{c.image}@sha256:{uuid.uuid5(uuid.NAMESPACE_URL, c.image).hex}" if c.container_id else "",
        "ready": c.state == "running" and not rt.deleting,
        "started": c.state == "running",
        "restartCount": c.restart_count,
        "state": _state_json(c),
        "lastState": {"terminated": c.last_terminated} if c.last_terminated else {},
    }
    if c.container_id:
        status["containerID"] = c.container_id
    if not health:
        return status
    resources = allocated_resources_status(rt, c, devices, plugins) + (extended(rt.uid, c.name) if extended else [])
    if resources:
        status["allocatedResourcesStatus"] = resources
    return status


def render_status(pod: Obj, rt: PodRt, devices: DeviceRegistry, plugins: dict[str, DriverPlugin],
                  extended: ExtendedStatus | None = None, health: bool = True) -> None:
    """Write the kubelet-owned parts of ``pod.status`` in place; other fields are kept."""
    status = pod.setdefault("status", {})
    now = now_rfc3339()
    ready = rt.ready()
    started = any(c.container_id for c in rt.containers)
    wanted = {
        "PodReadyToStartContainers": started or rt.phase != "Pending",
        "Initialized": True,
        "Ready": ready,
        "ContainersReady": ready,
        "PodScheduled": True,
    }
    old = {c.get("type"): c for c in status.get("conditions") or []}
    conds = [c for c in status.get("conditions") or [] if c.get("type") not in OWN_CONDITIONS]
    for ctype, ok in wanted.items():
        value = "True" if ok else "False"
        prev = old.get(ctype)
        cond: dict[str, Any] = {
            "type": ctype,
            "status": value,
            "lastProbeTime": None,
            "lastTransitionTime": prev.get("lastTransitionTime") if prev and prev.get("status") == value else now,
        }
        if not ok and ctype in ("Ready", "ContainersReady"):
            waiting = [c.name for c in rt.containers if c.state != "running"]
            cond["reason"] = "PodCompleted" if rt.phase in ("Succeeded", "Failed") else "ContainersNotReady"
            cond["message"] = f"containers with unready status: [{' '.join(waiting)}]"
        conds.append(cond)
    status.update(
        {
            "phase": rt.phase,
            "conditions": conds,
            "hostIP": rt.host_ip,
            "hostIPs": [{"ip": rt.host_ip}],
            "startTime": rt.start_time,
            "qosClass": "BestEffort",
            "containerStatuses": [container_status(rt, c, devices, plugins, extended, health)
                                  for c in rt.containers],
        }
    )
    if rt.pod_ip:
        status["podIP"] = rt.pod_ip
        status["podIPs"] = [{"ip": rt.pod_ip}]
