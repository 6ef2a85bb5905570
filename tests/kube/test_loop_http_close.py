"""A gateway's loop connections are closed whatever state their event loop is in when the gateway closes.

``LoopHttp`` keeps one aiohttp session per loop; a gateway is closed (or collected) from synchronous code
while that loop may be idle, closed, running on this thread, running on another, or idle while another
loop runs here. aiohttp reports a connector or connection left open with a ``ResourceWarning`` from its
finalizer (``aiohttp/connector.py``, ``BaseConnector.__del__``), which this suite's ``filterwarnings =
error`` turns into a failure of whichever later test the collector happens to run in: each case here is
checked on its own, warnings caught as unraisable exceptions after a full collection.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web

from podmedic.kube.api_requests import ApiRequest
from podmedic.kube.loop_http import LoopHttp
from podmedic.kube.throttle import TokenBucket

REQUEST = ApiRequest("a test read", "GET", "/x")


class Server:
    """An HTTP server on a loop of its own thread, which can drop its clients' connections."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.dropped = False
        app = web.Application()

        async def answer(_: web.Request) -> web.Response:
            return web.json_response({"kind": "Status"})

        app.router.add_get("/x", answer)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        assert self.runner.addresses
        self.port = self.runner.addresses[0][1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def drop_connections(self) -> None:
        """Stop serving, closing every client's connection from this end."""
        if not self.dropped:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
            self.dropped = True

    def stop(self) -> None:
        self.drop_connections()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def unraisable() -> Iterator[list[str]]:
    """What finalizers raised (warnings are errors here) while the test ran, after a full collection."""
    caught: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda report: caught.append(repr(report.exc_value))
    try:
        yield caught
    finally:
        sys.unraisablehook = previous


def _http(server: Server) -> LoopHttp:
    settings = types.SimpleNamespace(host=f"http://127.0.0.1:{server.port}", proxy=None, tls_server_name=None,
                                     assert_hostname=None, auth_settings=dict)
    return LoopHttp(settings, TokenBucket(1000, 1000), 5)


def _left_open(run: Callable[[], Any], caught: list[str]) -> list[str]:
    run()
    gc.collect()
    return caught


def test_a_gateway_closed_beside_its_idle_loop_closes_its_connections(server: Server, unraisable: list[str]) -> None:
    def run() -> None:
        http, loop = _http(server), asyncio.new_event_loop()
        loop.run_until_complete(http.call(REQUEST, "test"))
        http.close()
        loop.close()

    assert _left_open(run, unraisable) == []


@pytest.mark.parametrize("let_go", ["closed", "collected"])
def test_a_gateway_let_go_after_its_loop_closed_leaves_no_connector_open(
        server: Server, unraisable: list[str], let_go: str) -> None:
    # The loop's transports went with it (the server dropped them first, as the simulator does when it stops):
    # what is left is aiohttp's pool, which must be marked closed or its finalizer warns.
    def run() -> None:
        http, loop = _http(server), asyncio.new_event_loop()
        loop.run_until_complete(http.call(REQUEST, "test"))
        server.drop_connections()
        loop.run_until_complete(asyncio.sleep(0.1))
        loop.close()
        if let_go == "closed":
            http.close()
        del http  # collected: the gateway's finalizer closes what nobody closed

    assert _left_open(run, unraisable) == []


def test_a_gateway_closed_on_its_running_loop_closes_its_connections(server: Server, unraisable: list[str]) -> None:
    async def use_and_close() -> None:
        http = _http(server)
        await http.call(REQUEST, "test")
        http.close()  # the loop ends right after: asyncio.run cancels what was left to wait for

    assert _left_open(lambda: asyncio.run(use_and_close()), unraisable) == []


def test_a_gateway_used_again_after_its_close_closes_what_it_opened_again(server: Server,
                                                                           unraisable: list[str]) -> None:
    # A worker stopping: its gateway is closed while an activity's call is still under way, and that call
    # (or the next) opens the loop's connections again; nobody closes the gateway a second time.
    async def close_then_use() -> None:
        http = _http(server)
        await http.call(REQUEST, "test")
        http.close()
        await http.call(REQUEST, "test")
        del http  # collected on its running loop

    assert _left_open(lambda: asyncio.run(close_then_use()), unraisable) == []


def test_a_gateway_closed_while_another_loop_runs_here_closes_its_connections(
        server: Server, unraisable: list[str]) -> None:
    def run() -> None:
        http, loop = _http(server), asyncio.new_event_loop()
        loop.run_until_complete(http.call(REQUEST, "test"))

        async def close_from_another_loop() -> None:
            http.close()

        asyncio.run(close_from_another_loop())
        loop.close()

    assert _left_open(run, unraisable) == []


def test_a_gateway_closed_from_outside_its_running_loop_hands_the_close_to_it(
        server: Server, unraisable: list[str]) -> None:
    def run() -> None:
        http, loop = _http(server), asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        asyncio.run_coroutine_threadsafe(http.call(REQUEST, "test"), loop).result(10)
        http.close()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()

    assert _left_open(run, unraisable) == []
