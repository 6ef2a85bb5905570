"""What the NVML agent reads from a GPU: plain data, so translation is testable without a GPU."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceInfo:
    """A GPU as NVML enumerates it."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str


@dataclass(frozen=True)
class Reading:
    """One device's readings at one time; ``None`` means NVML could not read it (not supported).

    Attributes:
        index: NVML device index.
        at: When the reading was taken (tz-aware).
        ecc_corrected: Volatile corrected (single-bit) ECC errors since the driver loaded.
        ecc_uncorrected: Volatile uncorrected (double-bit) ECC errors since the driver loaded.
        retired_pages: Retired memory pages, or remapped rows on GPUs with a row remapper.
        row_remap_failure: The row remapper ran out of spare rows (the GPU needs service).
        temperature_c: GPU core temperature.
        slowdown: Active clock slowdown reasons of the hardware or thermal kind (``()``: none).
        nvlink_active: Indices of the NVLink links that are up.
        nvlink_errors: Sum of the NVLink data-link error counters (replay, recovery, CRC).
        lost: NVML answered "GPU is lost" (fallen off the bus).
        uuid: The GPU's UUID as read now; a new one at the same index means the GPU was replaced.
    """

    index: int
    at: dt.datetime
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    retired_pages: int | None = None
    row_remap_failure: bool | None = None
    temperature_c: float | None = None
    slowdown: tuple[str, ...] | None = None
    nvlink_active: frozenset[int] | None = None
    nvlink_errors: int | None = None
    lost: bool = False
    uuid: str | None = None


@dataclass(frozen=True)
class XidEvent:
    """An XID critical error NVML delivered through the event set."""

    index: int
    xid: int
    at: dt.datetime
