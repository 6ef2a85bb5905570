"""Method ``http``: a tiny endpoint podmedic POSTs to through the API server's pod proxy.

Request: ``POST <path>`` with ``{"request_id": "..."}`` and header ``Idempotency-Key``.
Answer: ``200 {"request_id", "checkpoint_id", "location"}`` once saved; the same request id
answers the same checkpoint without saving again; a failing ``save`` answers 500 with the error.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from podmedic.workload.protocol import DEFAULT_PATH, DEFAULT_PORT, Save


class CheckpointServer:
    """Serves the checkpoint endpoint in a background thread, calling ``save`` once per request id."""

    def __init__(self, save: Save, port: int = DEFAULT_PORT, path: str = DEFAULT_PATH, host: str = "0.0.0.0"):
        self.save = save
        self.path = path
        self._answers: dict[str, tuple[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()  # one save at a time; duplicates wait and get the same answer
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``)."""
        return int(self._server.server_address[1])

    def answer(self, request_id: str) -> tuple[int, dict[str, Any]]:
        """Save for ``request_id`` unless already saved; returns the HTTP status and body."""
        with self._lock:
            if request_id in self._answers:
                return self._answers[request_id]
            try:
                checkpoint_id, location = self.save(request_id)
                result = (200, {"request_id": request_id, "checkpoint_id": str(checkpoint_id),
                                "location": str(location)})
            except Exception as err:  # the workload's own failure is the answer, not a crash
                return 500, {"request_id": request_id, "error": f"save failed: {err}"}
            self._answers[request_id] = result
            return result

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                if self.path.split("?")[0] != owner.path:
                    self._send(404, {"error": f"no handler for {self.path}"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = None
                request_id = body.get("request_id") if isinstance(body, dict) else None
                request_id = request_id or self.headers.get("Idempotency-Key")
                if not isinstance(request_id, str) or not request_id:
                    self._send(400, {"error": "request_id: required, a non-empty string"})
                    return
                self._send(*owner.answer(request_id))

            def log_message(self, format: str, *args: Any) -> None:
                return  # podmedic's calls are not the training log's business

        return Handler

    def start(self) -> CheckpointServer:
        """Serve in a daemon thread; returns ``self``."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="podmedic-checkpoint", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
