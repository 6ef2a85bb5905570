"""NvmlReader: the real no-NVML path on this machine, and its mapping of NVML answers
(through a stand-in for the ``pynvml`` module; the constants and errors are pynvml's own)."""

from __future__ import annotations

import ctypes
import datetime as dt
from collections import deque
from types import SimpleNamespace
from typing import Any

import pynvml  # type: ignore[import-untyped]
import pytest

from workers.agent.nvml_reader import NvmlReader, NvmlUnavailable, explain

NOW = dt.datetime(2025, 3, 14, 9, 0, tzinfo=dt.UTC)


def _nvml_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_present(), reason="this machine has NVML")
def test_real_nvml_absent_gives_the_clear_error() -> None:
    with pytest.raises(NvmlUnavailable) as caught:
        NvmlReader()
    assert str(caught.value) == ("NVML is not available on this machine (libnvidia-ml.so.1 not found): "
                                 "run the agent on a GPU node with the NVIDIA driver")


def err(code: int) -> Exception:
    return pynvml.NVMLError(code)  # type: ignore[no-any-return]


NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED


class FakeNvml:  # method names are pynvml's
    """``pynvml`` with two GPUs whose answers a test sets; an exception value is raised."""

    def __init__(self, init_error: int | None = None, count: int = 2) -> None:
        for name in dir(pynvml):
            if name.startswith(("NVML_", "nvmlEventType", "NVMLError")):
                setattr(self, name, getattr(pynvml, name))
        self.init_error, self.count = init_error, count
        self.shutdowns = 0
        self.queue: deque[Any] = deque()
        self.registered: list[int] = []
        self.answers: dict[str, Any] = {
            "ecc0": 7, "ecc1": 0, "rows": (2, 1, 0, 0), "temp": 64, "reasons": 0x40 | 0x04,
            "links": {0: 1, 1: 1, 2: 0}, "link_errors": 5, "events": pynvml.nvmlEventTypeXidCriticalError,
        }

    def _answer(self, key: str) -> Any:
        value = self.answers[key]
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise err(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return 100 + i

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h}"

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(busId=f"00000000:{h}:00.0")

    def nvmlDeviceGetIndex(self, h: int) -> int:
        return h - 100

    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlDeviceGetSupportedEventTypes(self, h: int) -> int:
        return int(self._answer("events"))

    def nvmlDeviceRegisterEvents(self, h: int, types: int, events: str) -> None:
        self.registered.append(h)

    def nvmlEventSetWait_v2(self, events: str, timeout_ms: int) -> Any:
        if not self.queue:
            raise err(pynvml.NVML_ERROR_TIMEOUT)
        return self.queue.popleft()

    def nvmlEventSetFree(self, events: str) -> None:
        pass

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int:
        assert counter == pynvml.NVML_VOLATILE_ECC
        return int(self._answer(f"ecc{kind}"))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        return self._answer("rows")  # type: ignore[no-any-return]

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        return [1, 2, 3] if cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR else [9]

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._answer("temp"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._answer("reasons"))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        return 0x08

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        links = self._answer("links")
        if link not in links:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(links[link])

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        return int(self._answer("link_errors"))


def test_readings_map_every_nvml_answer() -> None:
    fake = FakeNvml()
    reader = NvmlReader(fake)
    assert [(d.index, d.uuid, d.name, d.pci_bus_id) for d in reader.devices] == [
        (0, "GPU-100", "NVIDIA H100 80GB HBM3", "00000000:100:00.0"),
        (1, "GPU-101", "NVIDIA H100 80GB HBM3", "00000000:101:00.0")]
    assert fake.registered == [100, 101]
    r = reader.read(1, NOW)
    assert (r.index, r.at, r.ecc_corrected, r.ecc_uncorrected) == (1, NOW, 7, 0)
    assert (r.retired_pages, r.row_remap_failure, r.temperature_c) == (3, False, 64)
    assert r.slowdown == ("hw_thermal",)  # the SW power cap (0x04) is normal under load
    assert r.nvlink_active == frozenset({0, 1}) and r.nvlink_errors == 2 * 4 * 5
    reader.close()
    assert fake.shutdowns == 1


def test_not_supported_readings_are_absent() -> None:
    fake = FakeNvml()
    for key in ("ecc0", "ecc1", "temp", "reasons", "rows"):
        fake.answers[key] = err(NOT_SUPPORTED)
    fake.answers["links"] = {}
    r = NvmlReader(fake).read(0, NOW)
    assert (r.ecc_corrected, r.ecc_uncorrected, r.temperature_c) == (None, None, None)
    assert r.slowdown == ("hw_slowdown",)  # fell back to the older throttle-reasons call
    assert (r.retired_pages, r.row_remap_failure) == (4, None)  # pre-Ampere: retired pages, no remapper
    assert (r.nvlink_active, r.nvlink_errors) == (None, None)


def test_other_errors_are_absent_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml()
    fake.answers["temp"] = err(pynvml.NVML_ERROR_UNKNOWN)
    reader = NvmlReader(fake)
    assert reader.read(0, NOW).temperature_c is None and reader.read(0, NOW).temperature_c is None
    assert [m for m in caplog.messages if "temperature" in m] == ["GPU 0: reading temperature failed (Unknown Error); "
                                                                  "left out"]


def test_gpu_lost_is_a_reading() -> None:
    fake = FakeNvml()
    reader = NvmlReader(fake)
    fake.answers["ecc0"] = err(pynvml.NVML_ERROR_GPU_IS_LOST)
    r = reader.read(0, NOW)
    assert r.lost and r.temperature_c is None


def test_xid_events_are_drained() -> None:
    fake = FakeNvml()
    reader = NvmlReader(fake)
    assert reader.wait_xids(0) == []
    xid = pynvml.nvmlEventTypeXidCriticalError
    fake.queue.extend([SimpleNamespace(device=101, eventType=xid, eventData=79),
                       SimpleNamespace(device=100, eventType=0x1, eventData=0),
                       SimpleNamespace(device=100, eventType=xid, eventData=13)])
    assert [(e.index, e.xid) for e in reader.wait_xids(10)] == [(1, 79), (0, 13)]
    assert not fake.queue


def test_devices_without_xid_events_are_not_registered(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml()
    fake.answers["events"] = 0
    reader = NvmlReader(fake)
    assert fake.registered == [] and reader.wait_xids(1) == []
    assert "GPU 0 does not report XID events" in caplog.messages


@pytest.mark.parametrize(("code", "words"), [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 not found"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "kernel driver is not loaded"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "/dev/nvidia*"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "versions differ"),
    (pynvml.NVML_ERROR_UNKNOWN, "NVML failed to initialise (Unknown Error)"),
])
def test_init_failures_say_what_they_mean(code: int, words: str) -> None:
    with pytest.raises(NvmlUnavailable) as caught:
        NvmlReader(FakeNvml(init_error=code))
    assert words in str(caught.value) and words in explain(err(code))


def test_no_gpus_is_unavailable() -> None:
    fake = FakeNvml(count=0)
    with pytest.raises(NvmlUnavailable, match="found no GPUs"):
        NvmlReader(fake)
    assert fake.shutdowns == 1
