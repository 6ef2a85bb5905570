"""Readiness for Kubernetes probes: what a process needs to do its work, checked in the background.

``/healthz`` (liveness) says only that the event loop answers: restarting a process because its
Temporal server or the API server is away would not bring either back. ``/readyz`` says whether
the process can work now: each named check (Temporal answers its health check, the API server
answers ``/version``, the watches have listed once) runs every ``interval_s`` in the background,
so a probe never waits on the network, and a failing check names itself in the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client

log = logging.getLogger("podmedic.probes")

Check = Callable[[], Awaitable[str | None]]
"""A check: ``None`` when fine, else why not (an exception counts as its message)."""


class Readiness:
    """The latest answer of every check, refreshed in the background."""

    def __init__(self, checks: dict[str, Check], *, interval_s: float = 5.0, timeout_s: float = 3.0) -> None:
        self.checks = checks
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.problems: dict[str, str] = {name: "not checked yet" for name in checks}

    async def _one(self, name: str, check: Check) -> tuple[str, str | None]:
        try:
            async with asyncio.timeout(self.timeout_s):
                return name, await check()
        except TimeoutError:
            return name, f"no answer within {self.timeout_s:g}s"
        except Exception as exc:  # a probe reports every failure; none may stop the refresher
            return name, (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]

    async def refresh(self) -> None:
        """Run every check once, together."""
        answers = await asyncio.gather(*(self._one(n, c) for n, c in self.checks.items()))
        before = dict(self.problems)
        self.problems = {name: why for name, why in answers if why is not None}
        for name, why in self.problems.items():
            if before.get(name) != why:
                log.warning("not ready: %s: %s", name, why)
        for name in before.keys() - self.problems.keys():
            log.info("ready again: %s", name)

    def verdict(self) -> tuple[bool, str]:
        """Ready or not, and the answer's text (each failing check with why)."""
        if not self.problems:
            return True, "ready\n"
        return False, "".join(f"not ready: {name}: {why}\n" for name, why in sorted(self.problems.items()))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Readiness]:
        """Refresh every ``interval_s`` while the block runs (the first refresh right away)."""
        async def loop() -> None:
            while True:
                await self.refresh()
                await asyncio.sleep(self.interval_s)
        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def temporal_check(client: Client) -> Check:
    """Temporal's frontend answers its gRPC health check."""
    async def check() -> str | None:
        healthy = await client.service_client.check_health(timeout=timedelta(seconds=2))
        return None if healthy else f"Temporal at {client.service_client.config.target_host} reports not serving"
    return check


def api_server_check(version: Callable[[], Any]) -> Check:
    """The API server answers ``GET /version`` (``version`` is the gateway's blocking call)."""
    async def check() -> str | None:
        await asyncio.to_thread(version)
        return None
    return check
