"""What the simulated components share, handed to each as one object.

The scheduler, the kubelets and the device-taint eviction controller all read and write
the same store on the same clock, look devices up in the same registry and claims in the
same book, and record Events through the same recorder.
"""

from __future__ import annotations

from dataclasses import dataclass

from podmedic.domain.base import Obj
from podmedic_sim.admission import PodAdmission
from podmedic_sim.claims import ClaimBook
from podmedic_sim.config import SimConfig
from podmedic_sim.device_plugins import PluginDevices
from podmedic_sim.devices import DeviceRegistry
from podmedic_sim.recorder import Recorder
from podmedic_sim.store import Store, now_rfc3339
from podmedic_sim.timers import Timers


@dataclass(frozen=True)
class SimParts:
    """The simulated cluster's shared state and services."""

    store: Store
    config: SimConfig
    timers: Timers
    devices: DeviceRegistry
    claims: ClaimBook
    recorder: Recorder
    plugin_devices: PluginDevices
    # Pods the controllers create go through the mutating webhooks, as real controllers' do.
    admission: PodAdmission


def set_pod_condition(pod: Obj, cond: dict[str, str]) -> None:
    """Put ``cond`` in the pod's conditions in place of the one of its type, stamped now.

    The shape is ``PodCondition`` (k8s.io/api core/v1): ``lastProbeTime`` is null for the
    conditions the scheduler and the eviction paths write.
    """
    status = pod.setdefault("status", {})
    conds = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]]
    conds.append({**cond, "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
    status["conditions"] = conds
