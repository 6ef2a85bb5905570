"""The worker's health endpoint for Kubernetes probes (``podmedic worker --health-listen``).

``GET /healthz`` answers 200 while the event loop runs (liveness: a wedged loop stops answering).
``GET /readyz`` answers 200 only while the worker polls its task queue, Temporal answers its health
check and the API server answers (``podmedic/telemetry/probes.py``); 503 otherwise, naming what
is missing, and 503 while it drains.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from aiohttp import web

Verdict = Callable[[], tuple[bool, str]]
"""Ready or not, and the text of the answer."""


def health_app(ready: Verdict) -> web.Application:
    """The two probe routes; ``ready`` says whether the worker can work now."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        ok, text = ready()
        return web.Response(status=200 if ok else 503, text=text)

    app = web.Application()
    app.add_routes([web.get("/healthz", healthz), web.get("/readyz", readyz)])
    return app


@contextlib.asynccontextmanager
async def serving_health(listen: tuple[str, int] | None, ready: Verdict) -> AsyncIterator[int | None]:
    """Serve the probes on ``listen`` (host, port) while the block runs; yields the bound port (``None``: off)."""
    if listen is None:
        yield None
        return
    runner = web.AppRunner(health_app(ready), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, listen[0], listen[1])
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
