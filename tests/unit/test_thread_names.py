"""Kernel thread names, and the benchmarks' CPU per thread group read back through /proc.

The shape read is the kernel's: /proc/<pid>/task/<tid>/comm holds the name ``prctl(PR_SET_NAME)``
set, cut to 15 bytes (proc(5), prctl(2)); utime and stime are fields 14 and 15 of .../stat.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchmarks.detection import thread_cpu_seconds
from podmedic.telemetry.thread_names import name_os_thread

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")


def _burn(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_a_named_pool_thread_s_cpu_is_counted_under_its_name_without_its_number() -> None:
    before = thread_cpu_seconds(os.getpid()).get("burner-pool", 0.0)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="burner-pool", initializer=name_os_thread) as pool:
        futures = [pool.submit(_burn, 0.3) for _ in range(2)]
        [f.result() for f in futures]
        used = thread_cpu_seconds(os.getpid())
    assert used.get("burner-pool", 0.0) - before >= 0.5, used  # both threads, under one name


def test_a_long_name_is_cut_to_fifteen_bytes() -> None:
    seen: list[str] = []

    def named() -> None:
        name_os_thread("a-name-longer-than-fifteen")
        seen.append(Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip())

    thread = threading.Thread(target=named)
    thread.start()
    thread.join()
    assert seen == ["a-name-longer-t"]
