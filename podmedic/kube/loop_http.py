"""The gateway's requests sent on the event loop (aiohttp), for the worker's activities.

Every call an activity makes is sent here (``loop_calls.py``), not through the ``kubernetes``
client in a thread: the client's layers, urllib3 and ``http.client``'s header parsing, and the
hand-off to a thread and back cost the worker several times the CPU of a request sent on the loop
(docs/BENCHMARKS.md, "What the design rests on"). The processes that run in threads keep the
client (``GatewayCore``). The connection is the gateway's own (``kubernetes.client.Configuration``:
host, CA, client certificate, bearer token and its refresh hook, ``tls_server_name``), the QPS
budget is shared with the client's calls (``throttle.TokenBucket``), and answers are read as
``GatewayCore`` reads them: a 429 with ``Retry-After`` is sent again after it, anything else not
2xx is a ``KubeError`` (``podmedic/kube/errors.py``). A cluster reached through an HTTP proxy is
not served here (``usable``): its calls go through the client in a thread.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from podmedic.domain.base import Obj
from podmedic.kube.api_requests import ApiRequest
from podmedic.kube.errors import ProxyTimeout, ServerError, from_answer
from podmedic.kube.json_text import compact, parse
from podmedic.kube.throttle import MAX_RETRIES, MAX_WAIT_S, TokenBucket, throttle_wait

CONNECTIONS = 32
"""Kept-alive connections per event loop (the worker has one loop)."""
CONNECTION_RETRIES = 3
"""Tries again of a request whose connection failed, as urllib3's ``Retry(3)`` in the client's calls: a
connection that could not be made, for any method; one that broke, only for a method safe to repeat."""
REPEATABLE = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


@dataclass(frozen=True)
class Answer:
    """An API server's answer: status, reason phrase, headers and body text."""

    status: int
    reason: str
    headers: Any
    text: str

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status <= 299


def tls_context(settings: Any) -> ssl.SSLContext | None:
    """The TLS settings of ``settings`` (a ``kubernetes.client.Configuration``) as an SSL context;
    ``None`` for a plain-HTTP server."""
    if not str(settings.host).startswith("https"):
        return None
    context = ssl.create_default_context(cafile=settings.ssl_ca_cert or None)
    if getattr(settings, "ca_cert_data", None):
        context.load_verify_locations(cadata=settings.ca_cert_data)
    if settings.cert_file:
        context.load_cert_chain(settings.cert_file, settings.key_file or None)
    if not settings.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif settings.assert_hostname is False:
        context.check_hostname = False
    return context


class LoopHttp:
    """Requests on the running event loop, over one kept-alive connection pool per loop."""

    def __init__(self, settings: Any, limiter: TokenBucket, timeout_s: float) -> None:
        self._settings = settings
        self._host = str(settings.host).rstrip("/")
        self._tls = tls_context(settings)
        name = getattr(settings, "tls_server_name", None) or (
            settings.assert_hostname if isinstance(settings.assert_hostname, str) else None)
        self._server_name: str | None = name if name and self._tls else None
        self.limiter = limiter
        self.timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.usable = not settings.proxy
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = \
            weakref.WeakKeyDictionary()
        # Also when a gateway nobody closed (a CLI command's, a test's) is collected: a weakref's callback runs
        # before the sessions' own finalizers, which would warn that they were left open.
        self._closing = weakref.finalize(self, _close_sessions, self._sessions)

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=self._tls if self._tls else False),
                timeout=self._timeout, skip_auto_headers=("User-Agent",))
            self._sessions[loop] = session
            if not self._closing.alive:
                # Used again after ``close`` (a call still under way as a worker stops): the new session is
                # closed when this is collected, as the client's pool reopens and is dropped.
                self._closing = weakref.finalize(self, _close_sessions, self._sessions)
        return session

    def _headers(self, req: ApiRequest, user_agent: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        if req.body is not None:
            headers["Content-Type"] = req.content_type
        headers.update(req.headers)
        # The kubeconfig loaders' refresh hook runs here, as before every request of the client.
        auth = self._settings.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers["Authorization"] = str(auth["value"])
        return headers

    async def call(self, req: ApiRequest, user_agent: str) -> Obj:
        """Send ``req``; its answer parsed (``{}`` when empty). A throttling 429 is sent again after its
        ``Retry-After`` (at most ``MAX_RETRIES`` times and ``MAX_WAIT_S`` in all); every other refusal
        raises its ``KubeError``, and a connection that fails past its retries ``ServerError``."""
        answer = await self.exchange(req, user_agent)
        if not answer.ok:
            raise from_answer(answer.status, answer.text, answer.reason, req.what)
        result: Obj = parse(answer.text) if answer.text else {}
        return result

    async def exchange(self, req: ApiRequest, user_agent: str, *, timeout_s: float | None = None,
                       throttled_again: bool = True) -> Answer:
        """Send ``req`` and return its last answer whatever its status (an Eviction's 429 names the
        budget in its body; a proxied call's answer is the workload's). With ``throttled_again``, a
        throttling 429 is sent again after its ``Retry-After`` as in ``call``. ``timeout_s``, when
        given, bounds this request (``ProxyTimeout`` past it) instead of the gateway's timeout."""
        slept = 0.0
        for attempt in range(MAX_RETRIES + 1):
            answer = await self._send(req, user_agent, timeout_s)
            wait = throttle_wait(answer.status, answer.headers, answer.text) \
                if throttled_again and attempt < MAX_RETRIES else None
            if wait is None or slept + wait > MAX_WAIT_S:
                return answer
            await asyncio.sleep(wait)
            slept += wait
            self.limiter.note_refused()
        raise AssertionError("unreachable: the last attempt returns")

    async def _send(self, req: ApiRequest, user_agent: str, timeout_s: float | None) -> Answer:
        """One request (and its tries again on a failed connection), after a token of the QPS budget each."""
        url = URL(self._host + req.target(), encoded=True)
        data = compact(req.body) if req.body is not None else None
        timeout = self._timeout if timeout_s is None else aiohttp.ClientTimeout(total=timeout_s)
        for retry in range(CONNECTION_RETRIES + 1):
            if (wait := self.limiter.reserve()) > 0:
                await asyncio.sleep(wait)
            try:
                async with self._session().request(req.method, url, data=data, headers=self._headers(req, user_agent),
                                                   server_hostname=self._server_name, timeout=timeout) as answer:
                    body = await answer.read()
                    return Answer(answer.status, answer.reason or "", answer.headers, body.decode("utf-8", "replace"))
            except aiohttp.ClientConnectorError as exc:  # never reached the server: safe to send again
                if retry == CONNECTION_RETRIES:
                    raise ServerError(f"{req.what}: {exc}") from exc
            except TimeoutError as exc:
                if timeout_s is not None:
                    raise ProxyTimeout(f"{req.what}: no answer within {timeout_s:g}s") from exc
                raise ServerError(f"{req.what}: no answer within {self.timeout_s:g}s") from exc
            except (aiohttp.ClientError, OSError) as exc:  # broke on the way: again only if repeating is safe
                if retry == CONNECTION_RETRIES or req.method not in REPEATABLE:
                    raise ServerError(f"{req.what}: {exc}") from exc
        raise AssertionError("unreachable: the last try returns or raises")

    async def aclose(self) -> None:
        """Close the running loop's connections (a loop about to end: ``asyncio.run``'s last step)."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    def close(self) -> None:
        """Drop every loop's connections (a loop that has ended has closed them already)."""
        self._closing()


def _close_sessions(sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession]) -> None:
    """Close every session from synchronous code (a finalizer, a gateway's close), each on its own loop.

    ``ClientSession.close()`` is a coroutine of the session's loop: an idle loop runs it to its end (on a
    thread of its own when another loop runs on this one), a loop running on another thread is handed it,
    and this thread's running loop or a closed loop has it run up to its first wait (``_close_now``).
    """
    here = _running_loop()
    for loop, session in list(sessions.items()):
        if loop.is_closed() or loop is here:
            _close_now(session)
        elif loop.is_running():
            asyncio.run_coroutine_threadsafe(session.close(), loop)
        elif here is None:
            loop.run_until_complete(session.close())
        else:
            closer = threading.Thread(target=loop.run_until_complete, args=(session.close(),), name="close-http")
            closer.start()
            closer.join()
    sessions.clear()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """This thread's running loop, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _close_now(session: aiohttp.ClientSession) -> None:
    """Run ``session.close()`` up to its first wait, without a loop to run it on.

    Its synchronous part is the whole close: the connector is marked closed and every connection closed
    (or, on a closed loop, dropped with the loop's transports). What it would wait for is its transports
    finishing to close, which their own loop does if it runs again; nothing is left for this coroutine.
    """
    closing = session.close()
    try:
        closing.send(None)
    except StopIteration:
        return
    except RuntimeError:  # its loop is closed and refused the transports' close: they go with the loop
        pass
    else:
        closing.close()
    session.detach()
