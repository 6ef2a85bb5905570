"""Each DRA driver's health stream to the kubelet of a node, as the kubelet's health cache sees it.

Upstream (pkg/kubelet/cm/dra/healthinfo.go and manager.go): a driver's plugin streams device
health (``NodeWatchResources``); the kubelet caches each device's last report. A device it has no
report for is Unknown; a device last reported longer ago than its health timeout (the plugin's
``health_check_timeout_seconds``, else ``DefaultHealthTimeout``, 30 s) is Unknown; when the
stream ends (the plugin exits) the kubelet clears the driver's cache, so every device is Unknown
at once. The pod's status shows it at the kubelet's next sync of the pod.

Modes per (driver, node): ``streaming`` (the default), ``silent`` (connected, sends nothing:
Unknown after the timeout) and ``ended`` (Unknown now).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from podmedic_sim.devices import DeviceRegistry, DevKey
from podmedic_sim.timers import Timers

Mode = Literal["streaming", "silent", "ended"]


class HealthStreams:
    """Which drivers' health streams are silent or ended on which node, since when."""

    def __init__(self, devices: DeviceRegistry, timers: Timers) -> None:
        self._devices = devices
        self._timers = timers
        self.sync_device: Callable[[DevKey], None] = lambda dev: None  # the kubelet's resync, wired by the engine
        self._stopped: dict[tuple[str, str], tuple[Mode, float]] = {}

    def set_mode(self, driver: str, node: str, mode: Mode, timeout_s: float) -> None:
        """Change a stream; the pods holding its devices are synced now, and again when the timeout passes."""
        if not any(i.driver == driver for i in self._devices.by_node.get(node, [])):
            raise KeyError(f"node {node} has no {driver} devices")
        if mode == "streaming":
            self._stopped.pop((driver, node), None)
        else:
            self._stopped[(driver, node)] = (mode, time.time())
        self._sync(driver, node)
        if mode == "silent":
            self._timers.call_later(timeout_s + 0.01, lambda: self._sync(driver, node))

    def reported(self, dev: DevKey, timeout_s: float, now: float | None = None) -> bool:
        """Whether the kubelet's cache still has a fresh report for ``dev``."""
        node = self._devices.node_of(dev)
        stopped = self._stopped.get((dev[0], node or ""))
        if stopped is None:
            return True
        mode, since = stopped
        return mode == "silent" and (now if now is not None else time.time()) - since <= timeout_s

    def _sync(self, driver: str, node: str) -> None:
        """The kubelet syncs the pods of these devices (its health-update notification, or its resync)."""
        for info in self._devices.by_node.get(node, []):
            if info.driver != driver:
                continue
            for name in info.devices:
                self.sync_device((driver, info.pool, name))
