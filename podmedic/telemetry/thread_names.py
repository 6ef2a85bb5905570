"""Python threads named for the operating system, so ``top -H``, ``ps -L`` and /proc tell them apart.

CPython 3.11 names its threads only for itself: every thread of a worker shows as ``python``
to the kernel, the asyncio loop, the 40 Kubernetes-call threads and the pod cache's watch
alike, and a CPU figure per thread (``python -m benchmarks cost``) cannot say which did the
work. ``prctl(PR_SET_NAME)`` gives the calling thread a kernel name of at most 15 bytes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

PR_SET_NAME = 15
MAX_NAME_BYTES = 15


def _prctl() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def name_os_thread(name: str | None = None) -> None:
    """Give the calling thread ``name`` (default: its Python name) as its kernel name, cut to 15 bytes;
    nothing where the platform has no ``prctl``."""
    if _PRCTL is None:
        return
    raw = (name or threading.current_thread().name).encode("ascii", "replace")[:MAX_NAME_BYTES]
    _PRCTL(PR_SET_NAME, ctypes.c_char_p(raw), 0, 0, 0)  # type: ignore[operator]
