"""``podmedic codec-server``: lets the Temporal UI (and ``temporal`` CLI) read encrypted payloads.

It speaks the remote codec protocol: ``POST /decode`` and ``POST /encode`` with a JSON body
``{"payloads": [...]}`` (protobuf JSON, bytes in base64) and answer the same shape. Point the
UI at it (dev server: ``temporal server start-dev --ui-codec-endpoint http://HOST:PORT``; a
production UI: its codec endpoint setting). The key never leaves this process; keep it
reachable only from operators' browsers (it decodes whatever it is sent).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from podmedic.temporal.codec import EncryptionCodec

ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"


def build_codec_app(codec: EncryptionCodec, origins: list[str]) -> web.Application:
    """The aiohttp app; ``origins`` are the UI origins allowed to call it from a browser."""

    def cors(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
        origin = request.headers.get("Origin", "")
        if origin and origin in origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Vary"] = "Origin"
        return response

    async def preflight(request: web.Request) -> web.StreamResponse:
        return cors(request, web.Response(status=204))

    def handler(decode: bool) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                body = await request.json()
                payloads = json_format.ParseDict(body, Payloads()).payloads
            except (json.JSONDecodeError, json_format.ParseError, ValueError) as exc:
                return cors(request, web.json_response({"error": f"body is not {{'payloads': [...]}}: {exc}"},
                                                       status=400))
            try:
                out = await (codec.decode(payloads) if decode else codec.encode(payloads))
            except Exception as exc:  # a payload sealed with an unknown key, or tampered with
                return cors(request, web.json_response({"error": f"cannot {'decode' if decode else 'encode'}: "
                                                                 f"{exc or type(exc).__name__}"}, status=422))
            return cors(request, web.json_response(json_format.MessageToDict(Payloads(payloads=out))))
        return handle

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_post("/decode", handler(decode=True))
    app.router.add_post("/encode", handler(decode=False))
    app.router.add_route("OPTIONS", "/decode", preflight)
    app.router.add_route("OPTIONS", "/encode", preflight)
    return app


CODEC_HELP = """\
Serve the remote codec protocol so the Temporal UI shows podmedic's encrypted payloads.

The key file is the one the worker and ingest use (PODMEDIC_PAYLOAD_KEY_FILE): one base64
AES-256 key per line, newest first. Make one with:  head -c 32 /dev/urandom | base64

Example (dev server):
  podmedic codec-server --key-file key.b64 --listen 127.0.0.1:8081 --origin http://localhost:8233
  temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8081
"""


def add_codec_server_parser(sub: Any) -> None:
    """Register ``podmedic codec-server``."""
    import argparse
    from pathlib import Path

    from podmedic.settings import CodecServerSettings
    from podmedic.settings.describe import help_epilog

    p = sub.add_parser("codec-server", help="decode encrypted payloads for the Temporal UI",
                       description=CODEC_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=help_epilog(CodecServerSettings, "codec-server"))
    p.add_argument("--key-file", dest="payload_key_file", type=Path,
                   help="AES-256 key file (env PODMEDIC_PAYLOAD_KEY_FILE)")
    p.add_argument("--listen", default="127.0.0.1:8081", metavar="HOST:PORT",
                   help="address to listen on (default %(default)s)")
    p.add_argument("--origin", action="append", default=[], metavar="URL",
                   help="a Temporal UI origin allowed to call it, e.g. http://localhost:8233 (repeatable)")
    p.set_defaults(func=_serve, settings_model=CodecServerSettings)


def _serve(args: Any) -> int:
    import sys

    from podmedic.temporal.codec import CodecKeyError, load_keys

    if args.payload_key_file is None:
        print("podmedic codec-server: no key: pass --key-file or set PODMEDIC_PAYLOAD_KEY_FILE", file=sys.stderr)
        return 2
    try:
        codec = EncryptionCodec(load_keys(args.payload_key_file))
    except CodecKeyError as exc:
        print(f"podmedic codec-server: {exc}", file=sys.stderr)
        return 2
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        print(f"podmedic codec-server: --listen {args.listen!r}: use HOST:PORT", file=sys.stderr)
        return 2
    print(f"codec server on http://{host}:{port} for origins: {', '.join(args.origin) or 'none (curl only)'}")
    web.run_app(build_codec_app(codec, args.origin), host=host, port=int(port), print=None)
    return 0
