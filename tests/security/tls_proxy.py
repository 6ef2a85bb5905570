"""A TLS-terminating TCP proxy in front of the dev server, which speaks only plaintext gRPC.

It demands a client certificate signed by the test CA (mTLS), offers ALPN ``h2`` as gRPC
servers do, and pipes bytes both ways; a handshake that fails is counted, so a test can
tell a refused client from a broken proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from tests.security.certs import Pki


class TlsProxy:
    """``start()`` then connect to ``127.0.0.1:<port>``; ``close()`` when done."""

    def __init__(self, pki: Pki, upstream: str) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
        self.context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.context.set_alpn_protocols(["h2"])
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.port = 0
        self.accepted = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen on a free port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
