"""Device health straight from the NVIDIA driver, through NVML (package ``nvidia-ml-py``).

``NvmlReader`` enumerates the GPUs, registers for XID critical-error events and reads, per
device: volatile ECC counts, retired pages (remapped rows on GPUs with a row remapper),
temperature, clock slowdown reasons and NVLink link state and error counters. A reading the
GPU does not support (``NVML_ERROR_NOT_SUPPORTED``) is simply absent from the ``Reading``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pynvml  # type: ignore[import-untyped]

from workers.agent.readings import DeviceInfo, Reading, XidEvent

log = logging.getLogger(__name__)

# Slowdown reasons that mean the hardware protects itself (not the normal power cap under load).
_SLOWDOWN_BITS = {
    "hw_slowdown": 0x08,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
}
# Errors that mean "this GPU or driver cannot tell": the reading is left out, quietly.
_ABSENT = (
    pynvml.NVML_ERROR_NOT_SUPPORTED,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    pynvml.NVML_ERROR_INVALID_ARGUMENT,
    pynvml.NVML_ERROR_NO_PERMISSION,
)
_NVLINK_COUNTERS = (
    pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
    pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
    pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
    pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
)


class NvmlUnavailable(Exception):
    """NVML cannot be used on this machine; the message says what failed and what it means."""


class _GpuLost(Exception):
    """NVML answered NVML_ERROR_GPU_IS_LOST for a device."""


def explain(exc: Exception) -> str:
    """What an NVML initialisation failure means for the operator."""
    value = getattr(exc, "value", None)
    if value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return ("NVML is not available on this machine (libnvidia-ml.so.1 not found): "
                "run the agent on a GPU node with the NVIDIA driver")
    if value == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return "the NVIDIA kernel driver is not loaded (NVML: Driver Not Loaded): check `nvidia-smi` on this node"
    if value == pynvml.NVML_ERROR_NO_PERMISSION:
        return "no permission to use the NVIDIA driver (NVML: Insufficient Permissions): give the agent /dev/nvidia*"
    if value == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "NVML and the kernel driver versions differ (reboot or reload the driver after an upgrade)"
    return f"NVML failed to initialise ({exc}): run the agent on a GPU node with a working NVIDIA driver"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlReader:
    """An open NVML session: devices, XID events and readings. Close it when done."""

    def __init__(self, nvml: ModuleType | Any = pynvml) -> None:
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise NvmlUnavailable(explain(exc)) from None
        try:
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            self.devices = [self._info(i, h) for i, h in enumerate(self._handles)]
        except nvml.NVMLError as exc:
            nvml.nvmlShutdown()
            raise NvmlUnavailable(f"NVML could not enumerate the GPUs ({exc})") from None
        if not self.devices:
            nvml.nvmlShutdown()
            raise NvmlUnavailable("NVML found no GPUs on this machine: run the agent on GPU nodes only")
        self._by_uuid = {d.uuid: d.index for d in self.devices}
        self._events = self._register_xids()
        self._warned: set[tuple[int, str]] = set()

    def _info(self, index: int, handle: object) -> DeviceInfo:
        n = self._nvml
        return DeviceInfo(index=index, uuid=_text(n.nvmlDeviceGetUUID(handle)), name=_text(n.nvmlDeviceGetName(handle)),
                          pci_bus_id=_text(n.nvmlDeviceGetPciInfo(handle).busId))

    def _register_xids(self) -> object | None:
        n = self._nvml
        try:
            events = n.nvmlEventSetCreate()
        except n.NVMLError as exc:
            log.warning("XID events unavailable (nvmlEventSetCreate: %s): only periodic readings", exc)
            return None
        registered = 0
        for info, handle in zip(self.devices, self._handles, strict=True):
            try:
                if n.nvmlDeviceGetSupportedEventTypes(handle) & n.nvmlEventTypeXidCriticalError:
                    n.nvmlDeviceRegisterEvents(handle, n.nvmlEventTypeXidCriticalError, events)
                    registered += 1
                    continue
            except n.NVMLError as exc:
                log.warning("GPU %d: cannot register for XID events (%s)", info.index, exc)
                continue
            log.warning("GPU %d does not report XID events", info.index)
        return events if registered else None

    def wait_xids(self, timeout_ms: int) -> list[XidEvent]:
        """XID events within ``timeout_ms`` (blocking), then any already queued."""
        n = self._nvml
        if self._events is None:
            time.sleep(timeout_ms / 1000)
            return []
        out: list[XidEvent] = []
        wait = timeout_ms
        while True:
            try:
                data = n.nvmlEventSetWait_v2(self._events, wait)
            except n.NVMLError as exc:
                if getattr(exc, "value", None) != n.NVML_ERROR_TIMEOUT:
                    log.warning("waiting for XID events failed: %s", exc)
                return out
            if data.eventType == n.nvmlEventTypeXidCriticalError:
                out.append(XidEvent(index=self._index_of(data.device), xid=int(data.eventData),
                                    at=dt.datetime.now(dt.UTC)))
            wait = 0  # drain what is queued without waiting again

    def _index_of(self, handle: object) -> int:
        n = self._nvml
        try:
            return self._by_uuid[_text(n.nvmlDeviceGetUUID(handle))]
        except (n.NVMLError, KeyError):
            return int(n.nvmlDeviceGetIndex(handle))

    def _get(self, index: int, what: str, call: Callable[..., Any], *args: object) -> Any:
        n = self._nvml
        try:
            return call(*args)
        except n.NVMLError as exc:
            value = getattr(exc, "value", None)
            if value == n.NVML_ERROR_GPU_IS_LOST:
                raise _GpuLost from None
            if value not in _ABSENT and (index, what) not in self._warned:
                self._warned.add((index, what))
                log.warning("GPU %d: reading %s failed (%s); left out", index, what, exc)
            return None

    def read(self, index: int, at: dt.datetime) -> Reading:
        """Every supported reading of device ``index``."""
        try:
            return self._read(index, self._handles[index], at)
        except _GpuLost:
            return Reading(index=index, at=at, lost=True)

    def read_all(self, at: dt.datetime) -> list[Reading]:
        """``read`` for every device."""
        return [self.read(d.index, at) for d in self.devices]

    def _read(self, i: int, h: object, at: dt.datetime) -> Reading:
        n = self._nvml
        ecc = [self._get(i, "ecc", n.nvmlDeviceGetTotalEccErrors, h, kind, n.NVML_VOLATILE_ECC)
               for kind in (n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)]
        retired, remap_failure = self._retired(i, h)
        reasons = self._get(i, "clock events", n.nvmlDeviceGetCurrentClocksEventReasons, h)
        if reasons is None:
            reasons = self._get(i, "throttle", n.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        slowdown = None if reasons is None else tuple(k for k, bit in _SLOWDOWN_BITS.items() if int(reasons) & bit)
        temperature = self._get(i, "temperature", n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)
        active, errors = self._nvlink(i, h)
        uuid = self._get(i, "uuid", n.nvmlDeviceGetUUID, h)
        return Reading(index=i, at=at, ecc_corrected=ecc[0], ecc_uncorrected=ecc[1], retired_pages=retired,
                       row_remap_failure=remap_failure, temperature_c=temperature, slowdown=slowdown,
                       nvlink_active=active, nvlink_errors=errors, uuid=None if uuid is None else _text(uuid))

    def _retired(self, i: int, h: object) -> tuple[int | None, bool | None]:
        n = self._nvml
        rows = self._get(i, "remapped rows", n.nvmlDeviceGetRemappedRows, h)
        if rows is not None:  # Ampere and newer remap rows instead of retiring pages
            corrected, uncorrected, _pending, failure = rows
            return int(corrected) + int(uncorrected), bool(failure)
        pages = [self._get(i, "retired pages", n.nvmlDeviceGetRetiredPages, h, cause)
                 for cause in (n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                               n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)]
        return (None if any(p is None for p in pages) else sum(len(p) for p in pages)), None

    def _nvlink(self, i: int, h: object) -> tuple[frozenset[int] | None, int | None]:
        n = self._nvml
        active: set[int] = set()
        errors: int | None = None
        for link in range(n.NVML_NVLINK_MAX_LINKS):
            state = self._get(i, f"nvlink {link}", n.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                if link == 0:
                    return None, None  # no NVLink on this GPU
                continue
            if state != n.NVML_FEATURE_ENABLED:
                continue
            active.add(link)
            for counter in _NVLINK_COUNTERS:
                value = self._get(i, "nvlink errors", n.nvmlDeviceGetNvLinkErrorCounter, h, link, counter)
                if value is not None:
                    errors = (errors or 0) + int(value)
        return frozenset(active), errors

    def close(self) -> None:
        """Free the event set and shut NVML down."""
        n = self._nvml
        try:
            if self._events is not None:
                n.nvmlEventSetFree(self._events)
        finally:
            n.nvmlShutdown()
