"""``podmedic up``: the whole stack on embedded defaults, each part its own child process.

Children: the Temporal dev server (SQLite under the state dir, UI on, podmedic's search
attributes registered), the cluster simulator, a vendor ticket desk, the placement webhook
(registered with the simulator as deploy/ registers it with a cluster), the worker, the ingest
service and the node agent. A child that dies is restarted with back-off; ``endpoints.json`` says where
everything is. Logs go to ``<state-dir>/logs/<role>.log``.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal

from podmedic.domain import search
from podmedic.temporal.connect import DEFAULT_TASK_QUEUE
from workers.stack import placement_webhook
from workers.stack.readiness import StackError, free_port, wait_ready

log = logging.getLogger("podmedic.up")
BIN = Path(sys.executable).parent


@dataclass
class StackOptions:
    """What ``up`` starts."""

    state_dir: Path
    policy: Path | None = None
    nodes: int = 4
    devices_per_node: int = 8
    vendor_resolve_s: float = 6.0
    task_queue: str = DEFAULT_TASK_QUEUE
    supervise: bool = True
    """Restart children that die; a fault suite turns it off to kill and restart them itself."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for every child."""
    worker: bool = True
    """Start ``podmedic worker``; off, the operator runs one (from the image, in a debugger) against
    the endpoints in ``endpoints.json``."""
    admission: bool = True
    """Start ``podmedic admission``, the webhook that holds a replacement pod on its node (as in production)."""
    device_plugins: dict[str, int] = field(default_factory=dict)
    """Extended resources a device plugin serves on every simulated node (``nvidia.com/gpu``: 8)."""
    cdi_ids: Literal["none", "per-device", "shared"] | None = None
    """How the simulated DRA driver names devices in pod status; ``None``: the simulator's default."""


def ingest_token(state_dir: Path) -> Path:
    """The ingest's bearer token file under ``state_dir``, made once (owner-only)."""
    path = state_dir / "ingest-token"
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32))
    return path


@dataclass
class Child:
    """One supervised process."""

    role: str
    argv: list[str]
    ready: str
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    ports: tuple[str, ...] = ()
    """The ports (keys of ``Stack.ports``) this child binds: new ones are picked if they were taken."""
    before: Callable[[], None] | None = None
    """What must be done before the child first starts (the webhook's registration)."""


PORTS = ("temporal", "ui", "simulator", "vendor", "ingest", "admission")
PORT_RETRIES = 5


class Stack:
    """Starts, supervises and stops the children."""

    def __init__(self, options: StackOptions) -> None:
        self.o = options
        self.dir = options.state_dir.resolve()
        self.children: list[Child] = []
        self.endpoints: dict[str, object] = {}
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self.ports: dict[str, int] = {}

    def _plan(self) -> list[Child]:
        d, py = self.dir, [sys.executable, "-m", "workers.cli.main"]
        tp, ui, sim, vendor, ingest, webhook = (self.ports[k] for k in PORTS)
        kubeconfig = d / "kubeconfig"
        attrs = search.dev_server_flags()
        temporal_addr = f"127.0.0.1:{tp}"
        ticket_url = f"http://127.0.0.1:{vendor}/tickets"
        token_file = ingest_token(d)
        self.endpoints = {
            "temporal_address": temporal_addr, "temporal_namespace": "default",
            "ui_url": f"http://127.0.0.1:{ui}", "kubeconfig": str(kubeconfig),
            "sim_url": f"http://127.0.0.1:{sim}", "task_queue": self.o.task_queue,
            "ticket_url": ticket_url, "state_dir": str(d),
            "ingest_url": f"http://127.0.0.1:{ingest}", "ingest_token_file": str(token_file),
            **({"admission_url": f"https://127.0.0.1:{webhook}"} if self.o.admission else {}),
        }
        conn = self._connection()
        children = [
            Child("temporal", [str(BIN / "temporal"), "server", "start-dev", "--ip", "127.0.0.1",
                               "--port", str(tp), "--ui-port", str(ui), "--db-filename", str(d / "temporal.db"),
                               "--log-level", "error", "--sqlite-pragma", "journal_mode=WAL",
                               "--sqlite-pragma", "synchronous=OFF", *attrs], f"tcp:127.0.0.1:{tp}",
                  ports=("temporal", "ui")),
            Child("simulator", [*py, "sim", "serve", "--port", str(sim), "--nodes", str(self.o.nodes),
                                "--devices-per-node", str(self.o.devices_per_node), "--kubeconfig", str(kubeconfig),
                                *self._simulated_devices()],
                  f"http://127.0.0.1:{sim}/version", ports=("simulator",)),
            Child("vendor", [*py, "vendor-desk", "--port", str(vendor), "--sim-url", f"http://127.0.0.1:{sim}",
                             "--resolve-after", str(self.o.vendor_resolve_s), "--store", str(d / "tickets.json")],
                  f"http://127.0.0.1:{vendor}/healthz", ports=("vendor",)),
            Child("admission", [*py, *placement_webhook.argv(kubeconfig, webhook, d)], f"tcp:127.0.0.1:{webhook}",
                  ports=("admission",), before=lambda: placement_webhook.register(f"http://127.0.0.1:{sim}", webhook)),
            Child("worker", [*py, "worker", *conn], "", env={"PODMEDIC_TICKET_URL": ticket_url,
                                                             "PODMEDIC_UI_URL": f"http://127.0.0.1:{ui}"}),
            self._ingest("ingest", ingest),
            # The node agent as every GPU node runs it, reading the simulated GPUs (NVML's view of them):
            # the only source that sees a GPU fail while no pod holds it.
            Child("agent", [*py, "agent", "nvml", "--sim-url", f"http://127.0.0.1:{sim}", "--node", "all",
                            "--ingest-url", f"http://127.0.0.1:{ingest}", "--token-file", str(token_file),
                            "--interval", "2", *(["--policy", str(self.o.policy.resolve())] if self.o.policy else [])],
                  ""),
        ]
        off = {role for role, on in (("worker", self.o.worker), ("admission", self.o.admission)) if not on}
        return [c for c in children if c.role not in off]

    def _simulated_devices(self) -> list[str]:
        """``sim serve``'s device plugin and CDI flags, from the options."""
        flags = [f"--device-plugin={resource}={count}" for resource, count in self.o.device_plugins.items()]
        return flags + ([f"--cdi-ids={self.o.cdi_ids}"] if self.o.cdi_ids else [])

    def _connection(self) -> list[str]:
        """The worker's and the ingest's flags: Temporal, task queue, kubeconfig, policy."""
        conn = ["--temporal-address", str(self.endpoints["temporal_address"]), "--task-queue", self.o.task_queue,
                "--kubeconfig", str(self.dir / "kubeconfig")]
        return conn + (["--policy", str(self.o.policy.resolve())] if self.o.policy else [])

    def _ingest(self, role: str, port: int) -> Child:
        """An ingest replica: its own port and state directory (cursors, leader identity)."""
        d, py = self.dir, [sys.executable, "-m", "workers.cli.main"]
        return Child(role, [*py, "ingest", *self._connection(), "--listen", f"127.0.0.1:{port}", "--token-file",
                            str(ingest_token(d)), "--state-dir", str(d / role)], f"http://127.0.0.1:{port}/healthz",
                     ports=("ingest",) if role == "ingest" else ())

    def add_ingest_replica(self, role: str = "ingest-2") -> str:
        """Start one more ingest replica (the replicas elect a leader for the watches); its base URL."""
        port = free_port()
        child = self._ingest(role, port)
        self.children.append(child)
        self._spawn(child)
        self._write_endpoints()
        wait_ready(child.ready, 60, role, child.proc, self.dir / "logs" / f"{role}.log")
        return f"http://127.0.0.1:{port}"

    def remove(self, role: str) -> None:
        """Stop ``role`` as on a rollout (SIGTERM) and forget it."""
        self.kill(role, signal.SIGTERM)
        self.children = [c for c in self.children if c.role != role]
        self._write_endpoints()

    def _spawn(self, child: Child) -> None:
        logfile = open(self.dir / "logs" / f"{child.role}.log", "ab")  # noqa: SIM115 - owned by the child
        env = {**os.environ, **self.o.env, **child.env, "PYTHONUNBUFFERED": "1"}
        child.proc = subprocess.Popen(child.argv, stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      env=env, cwd=Path(__file__).resolve().parents[2])
        logfile.close()

    def _write_endpoints(self) -> None:
        pids = {c.role: c.proc.pid for c in self.children if c.proc}
        data = {**self.endpoints, "pids": pids}
        tmp = self.dir / "endpoints.json.tmp"
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.dir / "endpoints.json")

    def start(self) -> Stack:
        """Start every child in order, each once the one before is ready.

        A port is picked free and handed to the child, which binds it a moment later; another
        process may take it in between. A child that exits saying so gets new ports (and the
        children after it, the new addresses), up to ``PORT_RETRIES`` times; any other exit
        before ready ends the start at once with a ``StackError`` quoting the child's log.
        """
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.ports = {k: free_port() for k in PORTS}
        self.children = self._plan()
        retries = 0
        try:
            index = 0
            while index < len(self.children):
                child = self.children[index]
                log.info("starting %s", child.role)
                if child.before:
                    child.before()
                self._spawn(child)
                try:
                    if child.ready:
                        wait_ready(child.ready, 60, child.role, child.proc, self.dir / "logs" / f"{child.role}.log")
                except StackError as err:
                    if not (err.port_taken and child.ports and retries < PORT_RETRIES):
                        raise
                    retries += 1
                    taken = ", ".join(str(self.ports[k]) for k in child.ports)
                    self.ports.update({k: free_port() for k in child.ports})
                    log.warning("%s: port %s was taken before it could bind; trying port %s", child.role, taken,
                                ", ".join(str(self.ports[k]) for k in child.ports))
                    self.children[index:] = self._plan()[index:]
                    continue
                index += 1
        except BaseException:
            self.stop()  # a child that never became ready must not orphan the ones already running
            raise
        self._write_endpoints()
        if self.o.supervise:
            self._monitor = threading.Thread(target=self._supervise, name="podmedic-up", daemon=True)
            self._monitor.start()
        log.info("stack up: Temporal UI %s, endpoints in %s", self.endpoints["ui_url"], self.dir / "endpoints.json")
        return self

    def _supervise(self) -> None:
        while not self._stopping.wait(0.5):
            for child in self.children:
                if child.proc is None or child.proc.poll() is None:
                    continue
                delay = min(30.0, 2.0 ** min(child.restarts, 5))
                log.warning("%s exited with %s; restarting in %.0fs (restart %d, log %s)", child.role,
                            child.proc.returncode, delay, child.restarts + 1, self.dir / "logs" / f"{child.role}.log")
                if self._stopping.wait(delay):
                    return
                child.restarts += 1
                self._spawn(child)
                self._write_endpoints()

    def child(self, role: str) -> Child:
        """The child playing ``role`` (``temporal``, ``simulator``, ``vendor``, ``admission``, ``worker``,
        ``ingest``, ``agent``)."""
        return next(c for c in self.children if c.role == role)

    def kill(self, role: str, sig: signal.Signals = signal.SIGKILL, wait_s: float = 15.0) -> int | None:
        """Send ``sig`` to ``role`` and wait for it to exit (SIGKILL after ``wait_s``); its exit code."""
        proc = self.child(role).proc
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def respawn(self, role: str, ready_s: float = 60.0) -> None:
        """Start ``role`` again with the same arguments (same ports, same database) and wait until ready."""
        child = self.child(role)
        if child.proc is not None and child.proc.poll() is None:
            raise RuntimeError(f"{role} is still running (pid {child.proc.pid})")
        child.restarts += 1
        self._spawn(child)
        self._write_endpoints()
        if child.ready:
            wait_ready(child.ready, ready_s, role)

    def stop(self) -> None:
        """Stop the children, newest first: SIGTERM, then SIGKILL after 10 s."""
        self._stopping.set()
        if self._monitor:
            self._monitor.join(timeout=5)
        for child in reversed(self.children):
            if child.proc and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
                try:
                    child.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.proc.kill()
                    child.proc.wait()
        log.info("stack stopped")

    def wait_forever(self) -> None:
        """Block until SIGINT or SIGTERM."""
        done = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: done.set())
        print(f"podmedic up: Temporal UI {self.endpoints['ui_url']}  endpoints {self.dir / 'endpoints.json'}  "
              "(Ctrl-C stops)", flush=True)
        done.wait()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
