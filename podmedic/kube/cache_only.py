"""Reads the worker's caches answer alone, made on the event loop: no request, no thread.

An activity hands every gateway call to a thread (``activities/base.py``), because a call may wait
on the network. Most of an incident's polls never do: the restart's verification and the
checkpoint handshake read their pod from the pod cache (``podmedic/kube/pod_cache.py``) and its
claims from the claim cache (``activities/claim_cache.py``): a cached pod read takes 8 us of CPU on
the loop, and 66 us when handed to a thread and back. Within ``cache_only`` the gateway refuses to send any
request (``WouldRequest``, raised before anything is sent), so a caller can try a read on the loop and,
when a cache cannot answer it (not current, a pod it does not hold, ``live_reads``), make it again in
a thread. Only for reads: whatever ran before the refusal runs again in the thread.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_CACHE_ONLY = contextvars.ContextVar("podmedic_cache_only", default=False)


class WouldRequest(Exception):
    """A read within ``cache_only`` that needs the API server. Not a ``KubeError``: no caller's
    handling of API failures may take it for one."""


@contextlib.contextmanager
def cache_only() -> Iterator[None]:
    """Within it, in this context, the gateway sends no request: it raises ``WouldRequest`` instead."""
    token = _CACHE_ONLY.set(True)
    try:
        yield
    finally:
        _CACHE_ONLY.reset(token)


def may_request(what: str) -> None:
    """Raise ``WouldRequest`` when ``what``, a request, is asked for within ``cache_only``."""
    if _CACHE_ONLY.get():
        raise WouldRequest(f"{what}: needs the API server")
