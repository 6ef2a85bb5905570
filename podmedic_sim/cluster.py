"""``SimCluster``: the simulator as a Python object, serving HTTP from a background thread.

The store, the behaviour engine and the aiohttp app all live on one asyncio loop in a
daemon thread; other threads reach them through ``call``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from aiohttp import web

from podmedic_sim.admission import PodAdmission
from podmedic_sim.api_faults import ApiFault, ApiFaults
from podmedic_sim.config import SimConfig
from podmedic_sim.engine import SimEngine
from podmedic_sim.flow_control import FlowControl
from podmedic_sim.handlers_request import ApiContext
from podmedic_sim.kubeconfig import write_kubeconfig
from podmedic_sim.ledger import RequestLedger
from podmedic_sim.resources import ServedApi
from podmedic_sim.server import build_app
from podmedic_sim.store import DEFAULT_HISTORY, Store

T = TypeVar("T")
P = ParamSpec("P")


def _on_loop(action: Callable[Concatenate[SimEngine, P], T]) -> Callable[Concatenate[SimCluster, P], T]:
    """``SimCluster.<name>(...)``: the engine's action of that name, called on the loop."""

    def call(cluster: SimCluster, /, *args: P.args, **kwargs: P.kwargs) -> T:
        method = getattr(cluster.engine, action.__name__)
        result: T = cluster.call(lambda: method(*args, **kwargs))
        return result

    call.__name__ = action.__name__
    call.__doc__ = action.__doc__
    return call


class ApiOnlyEngine:
    """No behaviours: namespaces and bare nodes only, to exercise the API server alone.

    Used for ``SimCluster(api_only=True)`` (``sim serve --api-only``).
    """

    def __init__(self, store: Store, config: SimConfig) -> None:
        self.store, self.config = store, config

    def bootstrap(self) -> None:
        for ns in ("default", "kube-system"):
            self.store.create(
                "namespaces",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns},
                    "status": {"phase": "Active"},
                },
            )
        for i in range(self.config.nodes):
            self.store.create(
                "nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"node-{i:04d}", "labels": {}},
                    "spec": {},
                    "status": {},
                },
            )

    async def run(self) -> None:
        await asyncio.Event().wait()

    def routes(self) -> list[web.RouteDef]:
        return []

    def state(self) -> dict[str, Any]:
        return {"resource_version": self.store.resource_version}

    def set_device_health(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("the behaviour engine is not available")


class SimCluster:
    """A simulated Kubernetes cluster reachable through a kubeconfig."""

    def __init__(
        self,
        config: SimConfig | None = None,
        *,
        history_size: int = DEFAULT_HISTORY,
        bookmark_interval_s: float = 10.0,
        api_only: bool = False,
    ) -> None:
        self.config = config or SimConfig()
        self.store = Store(history_size=history_size)
        self.engine: Any = ApiOnlyEngine(self.store, self.config) if api_only else SimEngine(self.store, self.config)
        self.faults = ApiFaults()
        self.flow = FlowControl()
        self.ledger = RequestLedger()
        self.context = ApiContext(self.store, getattr(self.engine, "evict", None), bookmark_interval_s,
                                  api=ServedApi(self.config.taint_rule_version))
        self.admission: PodAdmission = getattr(self.engine, "admission", None) or PodAdmission(self.store)
        self.context.admit_pod = self.admission.admit
        kubelet = getattr(self.engine, "kubelet", None)
        self.context.exec_signal = kubelet.exec_signal if kubelet is not None else None
        self.url = ""
        self.kubeconfig_path: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._engine_task: asyncio.Task[None] | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, host: str = "127.0.0.1", port: int = 0, kubeconfig_path: Path | None = None, *,
              tls: bool = False) -> SimCluster:
        """Bootstrap, serve on ``host:port`` (0: any free port) and write the kubeconfig. With ``tls`` the
        API is HTTPS under a self-signed certificate the kubeconfig trusts (``certificate-authority-data``),
        as a cluster's is: kubectl sends a bearer token only over TLS (client-go ``clientcmd``)."""
        if self._loop is not None:
            raise RuntimeError("the simulator is already started")
        if kubeconfig_path is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="podmedic-sim-")
            kubeconfig_path = Path(self._tmpdir.name) / "kubeconfig"
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        served = None
        if tls:
            # Imported here: cryptography's extension module cannot be loaded again by the workflow sandbox,
            # which re-imports what a workflow's module imports (the simulator, in tests).
            from workers.admission.certs import self_signed

            served = self_signed(Path(kubeconfig_path).parent / "sim-tls", [shown, "localhost"])
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="podmedic-sim", daemon=True)
        self._thread.start()
        try:
            context = None
            if served is not None:
                context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                context.load_cert_chain(served.cert, served.key)
            bound = asyncio.run_coroutine_threadsafe(self._serve(host, port, context), loop).result()
        except BaseException:
            self.stop()
            raise
        self.url = f"{'https' if served else 'http'}://{shown}:{bound}"
        ca = served.ca.read_bytes() if served is not None and served.ca is not None else None
        self.kubeconfig_path = write_kubeconfig(Path(kubeconfig_path), self.url, ca_pem=ca)
        return self

    async def _serve(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        self.engine.bootstrap()
        self._engine_task = asyncio.get_running_loop().create_task(self.engine.run())
        first = self.engine.proxy_routes() if hasattr(self.engine, "proxy_routes") else []
        app = build_app(self.context, self.faults, self.engine.routes(), first, self.ledger, self.flow)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True, ssl_context=tls)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def _shutdown(self) -> None:
        for task in list(self.context.watches):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._engine_task is not None:
            self._engine_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._engine_task

    def stop(self) -> None:
        """Stop serving and the engine; idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        self._loop = None
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=30)
        loop.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> SimCluster:
        if self._loop is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- access from other threads -------------------------------------------------------
    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the simulator's loop thread and return its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the simulator is not running")
        if threading.current_thread() is self._thread:
            return fn(*args)

        async def run() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), loop).result()

    # The engine's actions, run on the simulator's loop with the engine's own signatures.
    set_device_health = _on_loop(SimEngine.set_device_health)
    set_slice_taint = _on_loop(SimEngine.set_slice_taint)
    set_prepare_failure = _on_loop(SimEngine.set_prepare_failure)

    def state(self) -> dict[str, Any]:
        """The same JSON as ``GET /sim/v1/state``."""
        result: dict[str, Any] = self.call(self.engine.state)
        return result

    def add_api_fault(self, **rule: Any) -> ApiFault:
        """Inject an API fault (same fields as ``POST /sim/v1/faults/api``)."""
        fault = ApiFault.model_validate(rule)
        self.call(self.faults.add, fault)
        return fault

    def clear_api_faults(self) -> None:
        """Remove every injected API fault."""
        self.call(self.faults.clear)
