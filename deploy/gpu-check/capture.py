"""A stand-in for ``podmedic ingest`` that keeps every CloudEvent the agent posts.

Usage: ``python capture.py PORT OUT.json``; answers 202 like the ingest and writes the
events it received (single or batch) to ``OUT.json`` when stopped with SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

from aiohttp import web

received: list[dict[str, Any]] = []


async def events(request: web.Request) -> web.Response:
    """Accept what the agent posts, as the ingest's ``/v1/events`` would."""
    if request.headers.get("Authorization") != "Bearer gpu-check":
        return web.json_response({"error": "bad token"}, status=401)
    body = await request.json()
    received.extend(body if isinstance(body, list) else [body])
    return web.json_response({"accepted": len(received)}, status=202)


def main() -> None:
    """Serve until SIGTERM, then write what arrived."""
    port, out = int(sys.argv[1]), sys.argv[2]

    def dump(*_: object) -> None:
        with open(out, "w") as f:
            json.dump(received, f, indent=2)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, dump)
    app = web.Application()
    app.router.add_post("/v1/events", events)
    web.run_app(app, host="127.0.0.1", port=port, print=None, handle_signals=False)


if __name__ == "__main__":
    main()
