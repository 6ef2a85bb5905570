"""The pod ``exec`` subresource over a WebSocket, speaking the channel protocol of the real API.

The ``kubernetes`` client's ``stream()`` opens ``GET .../pods/<name>/exec?command=...`` as a
WebSocket with subprotocol ``v4.channel.k8s.io``; kubectl 1.30+ asks for ``v5.channel.k8s.io`` only
(k8s.io/client-go ``tools/remotecommand/websocket.go``; v5 adds channel 255 to close stdin, which a
command that reads nothing never sends). Nothing runs unless one of the two is agreed: a request that
cannot be upgraded is refused first, so a client falling back to SPDY never runs a command twice or
runs one it reports as failed. Every binary frame starts with its channel
byte (0 stdin, 1 stdout, 2 stderr, 3 error), and the error channel ends the session with a
``Status`` (``Success``, or ``Failure``/``NonZeroExitCode`` whose first cause carries the exit
code). The simulated containers run no programs, so only ``kill`` is understood: it signals
PID 1, which dies of it and is restarted by the kubelet as its restart rules say. Any other
command exits 127 ("not found"), as a shell would.
"""

from __future__ import annotations

import json

from aiohttp import web

from podmedic_sim.handlers_common import ApiError
from podmedic_sim.handlers_read import get_object
from podmedic_sim.handlers_request import Target, context

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDOUT, STDERR, ERROR = 1, 2, 3
SIGNALS = {"HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "USR1": 10, "USR2": 12, "TERM": 15}


def parse_kill(argv: list[str]) -> tuple[int, str] | str:
    """``(signal number, pid)`` of ``kill [-s SIG | -SIG | -n N] PID``, or the error text."""
    if not argv or argv[0].rsplit("/", 1)[-1] != "kill":
        return f"{argv[0] if argv else ''}: not found"
    args = argv[1:]
    signal = "TERM"
    if len(args) >= 2 and args[0] in ("-s", "-n"):
        signal, args = args[1], args[2:]
    elif args and args[0].startswith("-") and len(args[0]) > 1:
        signal, args = args[0][1:], args[1:]
    if len(args) != 1:
        return "kill: usage: kill [-s sigspec | -n signum | -sigspec] pid"
    name = signal.upper().removeprefix("SIG")
    number = int(name) if name.isdigit() else SIGNALS.get(name)
    if number is None or not 0 < number < 65:
        return f"kill: {signal}: invalid signal specification"
    return number, args[0]


def _status(code: int, message: str = "") -> bytes:
    if code == 0:
        status: dict[str, object] = {"metadata": {}, "status": "Success"}
    else:
        status = {
            "metadata": {},
            "status": "Failure",
            "message": message or f"command terminated with non-zero exit code: {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    return bytes([ERROR]) + json.dumps(status).encode()


async def handle_exec(request: web.Request, target: Target) -> web.StreamResponse:
    """GET/POST pods/<name>/exec: upgrade to a WebSocket, run ``kill``, report the exit code."""
    ctx = context(request)
    assert target.namespace is not None and target.name is not None
    get_object(ctx.store, Target(target.rt, target.namespace, target.name, None))  # 404 when missing
    argv = request.query.getall("command", [])
    if not argv:
        raise ApiError(400, "you must specify at least 1 command")
    ws = web.WebSocketResponse(protocols=PROTOCOLS)
    ready = ws.can_prepare(request)
    if not ready.ok:
        raise ApiError(400, "Upgrade request required")
    if ready.protocol not in PROTOCOLS:
        raise ApiError(400, f"none of the offered subprotocols is supported: {', '.join(PROTOCOLS)}")
    container = request.query.get("container")
    parsed = parse_kill(argv)
    code, err = 0, ""
    if isinstance(parsed, str):
        code, err = 127 if parsed.endswith("not found") else 2, parsed
    else:
        signum, pid = parsed
        if pid != "1":
            code, err = 1, f"kill: ({pid}) - No such process"
        elif ctx.exec_signal is None:
            code, err = 1, "kill: no kubelet runs this pod (simulator without behaviours)"
        else:
            refused = ctx.exec_signal(target.namespace, target.name, container, signum)
            if refused is not None:
                # The real API refuses before upgrading when the container does not run.
                raise ApiError(400, refused, "BadRequest")
    await ws.prepare(request)
    if err and request.query.get("stderr", "").lower() in ("true", "1"):
        await ws.send_bytes(bytes([STDERR]) + (err + "\n").encode())
    await ws.send_bytes(_status(code, err))
    await ws.close()
    return ws
