"""NVML readings over time into CloudEvents of the ``io.podmedic.device.health.v1`` contract.

Pure: no I/O and no clock of its own; the caller passes readings with their times. What it
reports, per device:

- an XID → Unhealthy with the XID as ``code`` (one event per XID and device per read cycle);
- a rise of the volatile uncorrectable ECC count → Unhealthy, reason ``ecc-uncorrectable``;
- NVML saying the GPU is lost, the row remapper failing, or an NVLink link that was up going
  down → Unhealthy with reason ``gpu-lost``, ``row-remap-failure`` or ``nvlink-down``;
- readings (``metrics``) above the report thresholds → Unhealthy, reason ``degraded``, at
  most once per report interval;
- Healthy only when every problem it reported has gone away. An XID, an uncorrectable ECC
  error and a lost GPU are events, not states: once reported they never clear here; the
  incident verifies recovery through the cluster.
"""

from __future__ import annotations

import datetime as dt
import string
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from podmedic.domain.policy_detection import Detection
from workers.agent.readings import DeviceInfo, Reading, XidEvent

EVENT_TYPE = "io.podmedic.device.health.v1"
_TEMPLATE_FIELDS = frozenset({"index", "uuid", "node"})

CloudEvent = dict[str, Any]


def default_thresholds() -> dict[str, float]:
    """The policy's default degradation thresholds (``detection.degradation``)."""
    return dict(Detection().degradation)


@dataclass(frozen=True)
class AgentConfig:
    """How the agent names devices and when it reports readings.

    Attributes:
        node: Kubernetes node name; also the DRA pool (the NVIDIA DRA driver's pool is the node).
        driver: DRA driver name.
        device_template: DRA device name; fields ``index``, ``uuid``, ``node``.
        thresholds: Report a degradation when a metric exceeds its threshold.
        report_interval_s: At most one degradation report per device per this many seconds.
        rate_window_s: Rates (per hour) count the errors of this trailing window.
    """

    node: str
    driver: str = "gpu.nvidia.com"
    device_template: str = "gpu-{index}"
    thresholds: Mapping[str, float] = field(default_factory=default_thresholds)
    report_interval_s: float = 300.0
    rate_window_s: float = 3600.0

    def __post_init__(self) -> None:
        for _, name, _, conversion in string.Formatter().parse(self.device_template):
            if name is not None and (name not in _TEMPLATE_FIELDS or conversion):
                raise ValueError(f"device template {self.device_template!r}: {{{name}}} is not one of "
                                 f"{{index}}, {{uuid}}, {{node}}")
        if self.report_interval_s < 0 or self.rate_window_s <= 0:
            raise ValueError("report_interval_s must be >= 0 and rate_window_s > 0")

    @property
    def source(self) -> str:
        """CloudEvents ``source`` of this agent."""
        return f"podmedic-agent/{self.node}"

    def device_name(self, info: DeviceInfo) -> str:
        """The DRA device name of ``info``."""
        return self.device_template.format(index=info.index, uuid=info.uuid, node=self.node)


class _Rate:
    """Errors per hour from a cumulative counter: the count over the trailing window."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[dt.datetime, int]] = deque()

    def add(self, at: dt.datetime, count: int) -> float | None:
        if self.samples and count < self.samples[-1][1]:
            self.samples.clear()  # the driver reloaded or the GPU was reset: volatile counters restart
        self.samples.append((at, count))
        # Keep one sample at or before the window's start, so the window is fully covered.
        while len(self.samples) >= 2 and (at - self.samples[1][0]).total_seconds() >= self.window_s:
            self.samples.popleft()
        if len(self.samples) < 2:
            return None
        start, base = self.samples[0]
        span = max((at - start).total_seconds(), self.window_s)
        return (count - base) / span * 3600.0


@dataclass
class _Device:
    info: DeviceInfo
    ecc: _Rate
    nvlink: _Rate
    uncorrected: int | None = None
    slowdown_since: dt.datetime | None = None
    links_seen: frozenset[int] = frozenset()
    problems: set[str] = field(default_factory=set)
    last_degraded: dt.datetime | None = None


class Translator:
    """Keeps each device's history and turns new readings into CloudEvents."""

    def __init__(self, config: AgentConfig, devices: Iterable[DeviceInfo]) -> None:
        self.config = config
        self._devices = {d.index: self._new(d) for d in devices}
        self._seq = 0

    def _new(self, info: DeviceInfo) -> _Device:
        return _Device(info, _Rate(self.config.rate_window_s), _Rate(self.config.rate_window_s))

    def _device(self, index: int) -> _Device:
        if index not in self._devices:  # NVML knows a device we did not enumerate: name it by index
            self._devices[index] = self._new(DeviceInfo(index, "unknown", "unknown", "unknown"))
        return self._devices[index]

    def xids(self, events: Iterable[XidEvent]) -> list[CloudEvent]:
        """One Unhealthy event per (device, XID) among ``events``, with the count in the message."""
        groups: dict[tuple[int, int], list[XidEvent]] = {}
        for event in events:
            groups.setdefault((event.index, event.xid), []).append(event)
        out = []
        for (index, xid), seen in groups.items():
            dev = self._device(index)
            dev.problems.add("xid")
            times = f" ({len(seen)} times)" if len(seen) > 1 else ""
            out.append(self._event(dev, "Unhealthy", seen[0].at, reason="xid", code=xid,
                                   message=f"XID {xid}{times}"))
        return out

    def reading(self, reading: Reading) -> list[CloudEvent]:
        """Events for one new reading of a device: new problems, degradation, or recovery.

        A new UUID at the device's index means the GPU was replaced: what was known of the old
        one (its XIDs, counters, problems) is dropped, and the new GPU is reported Healthy unless
        its own readings say otherwise. NVML's is the only report of a replacement that no pod
        and no driver taint gives, and it is the one that lets a ticketed device's taint go.
        """
        replaced = self._replaced(reading)
        dev = self._device(reading.index)
        before = set(dev.problems) | ({"replaced"} if replaced else set())
        metrics = self._metrics(dev, reading)
        out = [self._event(dev, "Unhealthy", reading.at, reason=reason, message=message)
               for reason, message in self._new_problems(dev, reading)]
        over = self._over(metrics)
        due = dev.last_degraded is None or (
            (reading.at - dev.last_degraded).total_seconds() >= self.config.report_interval_s)
        if over and due:
            dev.problems.add("degraded")
            dev.last_degraded = reading.at
            out.append(self._event(dev, "Unhealthy", reading.at, reason="degraded",
                                   message=f"above report thresholds: {', '.join(over)}", metrics=metrics))
        elif not over:
            dev.problems.discard("degraded")
            dev.last_degraded = None
        if before and not dev.problems:
            out.append(self._event(dev, "Healthy", reading.at, reason="replaced" if replaced else "recovered",
                                   metrics=metrics, message=replaced or f"cleared: {', '.join(sorted(before))}"))
        return out

    def _replaced(self, reading: Reading) -> str:
        """``"GPU <index> replaced (<old uuid> -> <new uuid>)"`` when the UUID changed, else ``""``;
        the device's state starts over under the new identity."""
        old = self._device(reading.index)
        if not reading.uuid or reading.uuid == old.info.uuid or old.info.uuid == "unknown":
            return ""
        info = old.info
        self._devices[reading.index] = self._new(DeviceInfo(info.index, reading.uuid, info.name, info.pci_bus_id))
        lost = f"; problems of the old GPU: {', '.join(sorted(old.problems))}" if old.problems else ""
        return f"GPU {info.index} replaced ({info.uuid} -> {reading.uuid}){lost}"

    def snapshot(self, reading: Reading) -> CloudEvent:
        """The device's present state as one event (``--once``): Healthy unless a reading says not."""
        dev = self._device(reading.index)
        metrics = self._metrics(dev, reading)
        over = self._over(metrics)
        found = [(reason, text) for present, reason, text in (
            (bool(reading.ecc_uncorrected), "ecc-uncorrectable",
             f"{reading.ecc_uncorrected} volatile uncorrectable ECC errors"),
            (reading.lost, "gpu-lost", "NVML reports the GPU lost"),
            (bool(reading.row_remap_failure), "row-remap-failure", "row remapper failure"),
            (bool(over), "degraded", f"above report thresholds: {', '.join(over)}"),
        ) if present]
        reasons, problems = [r for r, _ in found], [t for _, t in found]
        health = "Unhealthy" if problems else "Healthy"
        return self._event(dev, health, reading.at, reason=reasons[0] if reasons else "",
                           message="; ".join(problems) or "readings within report thresholds", metrics=metrics)

    def _metrics(self, dev: _Device, r: Reading) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if r.temperature_c is not None:
            metrics["temperature_c"] = float(r.temperature_c)
        if r.retired_pages is not None:
            metrics["retired_pages"] = float(r.retired_pages)
        if r.slowdown is not None:
            dev.slowdown_since = (dev.slowdown_since or r.at) if r.slowdown else None
            metrics["throttle_s"] = (r.at - dev.slowdown_since).total_seconds() if dev.slowdown_since else 0.0
        for name, rate, count in (("ecc_correctable_per_hour", dev.ecc, r.ecc_corrected),
                                  ("nvlink_errors_per_hour", dev.nvlink, r.nvlink_errors)):
            value = rate.add(r.at, count) if count is not None else None
            if value is not None:
                metrics[name] = round(value, 3)
        return metrics

    def _over(self, metrics: Mapping[str, float]) -> list[str]:
        limits = self.config.thresholds
        return [f"{k} {v:g} > {limits[k]:g}" for k, v in sorted(metrics.items()) if k in limits and v > limits[k]]

    def _new_problems(self, dev: _Device, r: Reading) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        if r.ecc_uncorrected is not None:
            if dev.uncorrected is not None and r.ecc_uncorrected > dev.uncorrected:
                dev.problems.add("ecc-uncorrectable")
                found.append(("ecc-uncorrectable", f"volatile uncorrectable ECC errors rose from "
                                                   f"{dev.uncorrected} to {r.ecc_uncorrected}"))
            dev.uncorrected = r.ecc_uncorrected
        if r.lost and "gpu-lost" not in dev.problems:
            dev.problems.add("gpu-lost")
            found.append(("gpu-lost", "NVML reports the GPU is lost (fallen off the bus?)"))
        if r.row_remap_failure is not None:
            if r.row_remap_failure and "row-remap-failure" not in dev.problems:
                dev.problems.add("row-remap-failure")
                found.append(("row-remap-failure", "the row remapper has no spare rows left"))
            elif not r.row_remap_failure:
                dev.problems.discard("row-remap-failure")
        if r.nvlink_active is not None:
            down = dev.links_seen - r.nvlink_active
            if down and "nvlink-down" not in dev.problems:
                dev.problems.add("nvlink-down")
                found.append(("nvlink-down", f"NVLink links down: {', '.join(map(str, sorted(down)))}"))
            elif not down:
                dev.problems.discard("nvlink-down")
            dev.links_seen |= r.nvlink_active
        return found

    def _event(self, dev: _Device, health: str, at: dt.datetime, *, reason: str = "", code: int | None = None,
               message: str = "", metrics: Mapping[str, float] | None = None) -> CloudEvent:
        self._seq += 1
        cfg, info = self.config, dev.info
        when = at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
        data: dict[str, Any] = {"driver": cfg.driver, "pool": cfg.node, "device": cfg.device_name(info),
                                "node": cfg.node, "health": health, "observed_at": when}
        identity = f"GPU {info.index} {info.name}, uuid {info.uuid}, PCI {info.pci_bus_id}"
        data["message"] = f"{message} ({identity})" if message else identity
        if reason:
            data["reason"] = reason
        if code is not None:
            data["code"] = code
        if metrics:
            data["metrics"] = dict(metrics)
        return {"specversion": "1.0", "id": f"{data['device']}-{at.timestamp():.6f}-{self._seq}",
                "source": cfg.source, "type": EVENT_TYPE, "time": when,
                "datacontenttype": "application/json", "data": data}
