"""Which DRA device each ``allocatedResourcesStatus`` entry of a pod names, whatever its resourceID.

What the kubelet writes (kubernetes/kubernetes pkg/kubelet/cm/dra/manager.go,
``UpdateAllocatedResourcesStatus``): for every claim a container references, one entry named
``claim:<podClaimName>``, or ``claim:<podClaimName>/<request>`` when the reference names a
request, listing every device of that claim. A device's ``resourceID`` is the first CDI device
ID the driver returned from NodePrepareResources, and ``<driver>/<pool>/<device>`` only when it
returned none, although the API's own doc comment promises the latter. CDI IDs are
``<vendor>/<class>=<name>`` (the CDI specification) and opaque: dra-example-driver's
``k8s.<driver>/<class>=<claimUID>-<device>``, Intel QAT's ``intel.com/qat=<device>``, or one ID for
all of a claim's devices (``nvidia.com/gpu=all``); the v1.34 "Pods Report DRA Resource Health"
post shows ``example.com/gpu-a1b2-c3d4``.

So a resourceID is resolved through the pod's claims: entry name → the pod's claim → the
ResourceClaim's ``status.allocation.devices.results`` (request, driver, pool, device). One device
there is the answer; among several, the one whose name the CDI name part ends with. What stays
ambiguous or unknown is returned as ``Unresolved``, never dropped.

An entry whose name is not ``claim:...`` is a device plugin's (pkg/kubelet/cm/devicemanager/manager.go,
``UpdateAllocatedResourcesStatus``): named after the extended resource (``nvidia.com/gpu``), its
resourceIDs the plugin's device IDs. Those are returned as ``PluginEntry``: no DRA device to resolve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceRef, Health

ClaimOf = Callable[[str], Obj | None]  # ResourceClaim object name -> the claim, or None


@dataclass(frozen=True)
class Unresolved:
    """An entry podmedic could not tie to one device, with what is known about it."""

    entry: str
    resource_id: str
    claim: str | None
    health: Health
    message: str
    why: str


@dataclass(frozen=True)
class PluginEntry:
    """A device-plugin device as a pod reports it."""

    resource: str
    device_id: str
    health: Health
    message: str


@dataclass
class PodDeviceHealth:
    """A pod's reported device health: per resolved device, what could not be resolved, and the
    device plugins' devices."""

    devices: dict[DeviceRef, tuple[Health, str]] = field(default_factory=dict)
    unresolved: list[Unresolved] = field(default_factory=list)
    plugin: list[PluginEntry] = field(default_factory=list)

    def of(self, device: DeviceRef) -> tuple[Health, str] | None:
        """What the pod reports for ``device``: resolved, or else an unresolved entry whose CDI name
        names exactly this device (a pod that ended keeps reporting on claims the API has already
        deallocated, as the kubelet applies health to its tombstoned claims)."""
        found = self.devices.get(device)
        if found is not None:
            return found
        named = [u for u in self.unresolved if _matching(u.resource_id, [device])]
        return (named[0].health, named[0].message) if len(named) == 1 else None


def _health(raw: object) -> Health:
    try:
        return Health(str(raw or "Unknown"))
    except ValueError:
        return Health.UNKNOWN


def claim_object_name(pod: Obj, pod_claim: str) -> str | None:
    """The ResourceClaim behind the pod's claim ``pod_claim``: named in the spec, or generated from
    a template and recorded in ``status.resourceClaimStatuses``."""
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        if ref.get("name") == pod_claim and ref.get("resourceClaimName"):
            return str(ref["resourceClaimName"])
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == pod_claim and status.get("resourceClaimName"):
            return str(status["resourceClaimName"])
    return None


def claim_object_names(pod: Obj) -> list[str]:
    """Every ResourceClaim the pod uses: named in its spec, or generated from a template (only those
    are in ``status.resourceClaimStatuses``: k8s.io/api core/v1 PodResourceClaimStatus)."""
    names = (claim_object_name(pod, str(ref.get("name") or ""))
             for ref in (pod.get("spec") or {}).get("resourceClaims") or [])
    return [name for name in names if name]


def allocated_devices(claim: Obj) -> list[DeviceRef]:
    """The devices of a claim's allocation (``status.allocation.devices.results``); a result that
    names no valid device is left out (one bad object must not stop the watch that reads it)."""
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
    found: list[DeviceRef] = []
    for r in results:
        try:
            found.append(DeviceRef(driver=str(r.get("driver")), pool=str(r.get("pool")), device=str(r.get("device"))))
        except ValueError:
            continue
    return found


def _matching(resource_id: str, devices: list[DeviceRef]) -> list[DeviceRef]:
    """Devices a CDI ID names: its name part is the device's name or ends with ``-<device>``."""
    vendor_class, sep, name = resource_id.rpartition("=")
    if not sep:
        name = resource_id.rsplit("/", 1)[-1]
    hits = [d for d in devices if name == d.device or name.endswith(f"-{d.device}")]
    by_driver = [d for d in hits if d.driver in vendor_class]
    return by_driver or hits


def resolve(resource_id: str, entry: str, pod: Obj, claim_of: ClaimOf) -> DeviceRef | str:
    """The device ``resource_id`` under entry ``entry`` names, or why it cannot be told."""
    try:
        return DeviceRef.parse(resource_id)
    except ValueError:
        pass  # a CDI ID or another opaque form: look it up through the claim
    pod_claim = entry.removeprefix("claim:").split("/", 1)[0] if entry.startswith("claim:") else ""
    if not pod_claim:
        return f"entry {entry!r} names no DRA claim"
    name = claim_object_name(pod, pod_claim)
    if name is None:
        return f"the pod's claim {pod_claim!r} has no ResourceClaim in its spec or status"
    claim = claim_of(name)
    if claim is None:
        return f"ResourceClaim {name} is not known (deleted, or not seen yet)"
    devices = allocated_devices(claim)
    if len(devices) == 1:
        return devices[0]
    found = _matching(resource_id, devices)
    if len(found) == 1:
        return found[0]
    listed = ", ".join(d.resource_id for d in devices) or "none"
    return (f"resourceID {resource_id!r} of ResourceClaim {name} matches {len(found)} of its devices "
            f"({listed}): ambiguous")


_WORST_FIRST = (Health.UNHEALTHY, Health.UNKNOWN, Health.HEALTHY)


def _reports(pod: Obj) -> dict[tuple[str, str], tuple[Health, str]]:
    """(entry, resourceID) -> its health: the worst when a resourceID repeats (kubelets before the
    resourceID de-duplication in pkg/kubelet/cm/dra/manager.go appended one element per device, so a
    shared CDI ID could repeat with different healths; current ones list it once)."""
    found: dict[tuple[str, str], tuple[Health, str]] = {}
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for entry in status.get("allocatedResourcesStatus") or []:
            entry_name = str(entry.get("name") or "")
            for res in entry.get("resources") or []:
                rid = str(res.get("resourceID") or "")
                if not rid:
                    continue
                health, message = _health(res.get("health")), str(res.get("message") or "")
                before = found.get((entry_name, rid))
                if before is None or _WORST_FIRST.index(health) < _WORST_FIRST.index(before[0]):
                    found[(entry_name, rid)] = (health, message)
    return found


def claims_read(pod: Obj) -> list[str]:
    """The ResourceClaims ``pod_device_health`` looks up for ``pod``: those of its entries that name a
    device by an ID of the driver's (a CDI ID) rather than ``driver/pool/device``."""
    names: list[str] = []
    for entry_name, rid in _reports(pod):
        pod_claim = entry_name.removeprefix("claim:").split("/", 1)[0] if entry_name.startswith("claim:") else ""
        if pod_claim and not _names_device(rid) and (name := claim_object_name(pod, pod_claim)) is not None:
            names.append(name)
    return list(dict.fromkeys(names))


def _names_device(resource_id: str) -> bool:
    try:
        DeviceRef.parse(resource_id)
    except ValueError:
        return False
    return True


def pod_device_health(pod: Obj, claim_of: ClaimOf) -> PodDeviceHealth:
    """Every device the pod's containers report, resolved to DRA devices (see the module doc)."""
    out = PodDeviceHealth()
    for (entry_name, rid), (health, message) in _reports(pod).items():
        if not entry_name.startswith("claim:"):
            out.plugin.append(PluginEntry(entry_name, rid, health, message))
            continue
        device = resolve(rid, entry_name, pod, claim_of)
        if isinstance(device, DeviceRef):
            out.devices[device] = (health, message)
        else:
            pod_claim = entry_name.removeprefix("claim:").split("/", 1)[0] or None
            out.unresolved.append(Unresolved(entry_name, rid, pod_claim, health, message, device))
    return out
