"""Test doubles for the agent: readings over time, and a stub ingest server that records posts."""

from __future__ import annotations

import datetime as dt
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from workers.agent.readings import DeviceInfo, Reading

T0 = dt.datetime(2025, 3, 14, 9, 0, tzinfo=dt.UTC)
GPUS = [DeviceInfo(i, f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd", "NVIDIA H100 80GB HBM3", f"00000000:{i}C:00.0")
        for i in range(2)]


def at(seconds: float) -> dt.datetime:
    """``T0`` plus ``seconds``."""
    return T0 + dt.timedelta(seconds=seconds)


def reading(seconds: float, index: int = 0, **values: Any) -> Reading:
    """A reading of GPU ``index`` at ``T0 + seconds`` with healthy defaults, overridden by ``values``."""
    base: dict[str, Any] = {"ecc_corrected": 0, "ecc_uncorrected": 0, "retired_pages": 0, "row_remap_failure": False,
                            "temperature_c": 55.0, "slowdown": (), "nvlink_active": frozenset(range(4)),
                            "nvlink_errors": 0}
    return Reading(index=index, at=at(seconds), **{**base, **values})


@dataclass
class IngestStub:
    """An aiohttp server standing in for ``podmedic ingest``: answers from a script, records posts."""

    statuses: deque[tuple[int, dict[str, Any]]] = field(default_factory=deque)
    requests: list[tuple[dict[str, str], list[dict[str, Any]]]] = field(default_factory=list)
    url: str = ""
    runner: web.AppRunner | None = None

    def answer(self, *statuses: int | tuple[int, dict[str, Any]]) -> None:
        """Queue the next answers; when the script runs out, every post gets 202."""
        for s in statuses:
            self.statuses.append(s if isinstance(s, tuple) else (s, {"status": s}))

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event of every request, in order."""
        return [e for _, batch in self.requests for e in batch]

    async def _post(self, request: web.Request) -> web.Response:
        self.requests.append((dict(request.headers), json.loads(await request.read())))
        status, body = self.statuses.popleft() if self.statuses else (202, {"accepted": True})
        return web.json_response(body, status=status)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/events", self._post)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
