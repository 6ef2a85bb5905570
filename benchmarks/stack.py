"""What a benchmark runs against, started from nothing and stopped afterwards.

A Temporal dev server (``.venv/bin/temporal``, SQLite in a temp dir with the pragmas
``podmedic up`` uses, podmedic's search attributes registered, no UI), the cluster simulator
and the podmedic worker, each its own child process as in ``podmedic up``, so that the
ingest under test (in the benchmark's own process) does not share an interpreter with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from podmedic.domain import search
from podmedic.temporal.connect import connect
from workers.stack.readiness import free_port, wait_ready

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class StackConfig:
    """Shape of what is started."""

    nodes: int = 125
    devices_per_node: int = 8
    task_queue: str = "podmedic-bench"
    temporal_args: tuple[str, ...] = ()
    sqlite_pragmas: tuple[str, ...] = ("journal_mode=WAL", "synchronous=OFF")
    sim_timings: str | None = None  # SimTimings as JSON; None: the simulator's defaults
    checkpoint_every_steps: int = 0
    worker: bool = True  # podmedic's worker (off: a cluster nobody remediates)
    bare_worker: bool = False  # the bare-Temporal baseline's worker (benchmarks.bare)
    worker_env: tuple[tuple[str, str], ...] = ()  # more environment for podmedic's worker (its API budget)


@dataclass
class BenchStack:
    """Handles to the running stack."""

    client: Client
    temporal_address: str
    task_queue: str
    kubeconfig: Path
    sim_url: str
    workdir: Path
    pids: dict[str, int]


def _spawn(role: str, argv: list[str], logs: Path, env: tuple[tuple[str, str], ...] = ()) -> subprocess.Popen[bytes]:
    with open(logs / f"{role}.log", "ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "PODMEDIC_TICKET_URL": "", **dict(env)},
                                start_new_session=True)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in reversed(procs):
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def running_stack(config: StackConfig, keep_dir: Path | None = None) -> AsyncIterator[BenchStack]:
    """Start Temporal, the simulator and the worker; stop them all on exit (logs under the work dir)."""
    with contextlib.ExitStack() as cleanup:
        workdir = keep_dir or Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="podmedic-bench-")))
        logs = workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        procs: list[subprocess.Popen[bytes]] = []
        cleanup.callback(_stop, procs)
        tport, sport = free_port(), free_port()
        address, kubeconfig = f"127.0.0.1:{tport}", workdir / "kubeconfig"
        procs.append(_spawn("temporal", [
            str(BIN / "temporal"), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(tport), "--headless",
            "--db-filename", str(workdir / "temporal.db"), "--log-level", "error",
            *[arg for pragma in config.sqlite_pragmas for arg in ("--sqlite-pragma", pragma)],
            *search.dev_server_flags(), *config.temporal_args,
        ], logs))
        py = [sys.executable, "-m", "workers.cli.main"]
        procs.append(_spawn("simulator", [
            *py, "sim", "serve", "--port", str(sport), "--nodes", str(config.nodes),
            "--devices-per-node", str(config.devices_per_node), "--kubeconfig", str(kubeconfig),
            "--checkpoint-every-steps", str(config.checkpoint_every_steps),
            *(["--timings", config.sim_timings] if config.sim_timings else []),
        ], logs))
        await asyncio.to_thread(wait_ready, f"tcp:127.0.0.1:{tport}", 60, "temporal")
        await asyncio.to_thread(wait_ready, f"http://127.0.0.1:{sport}/version", 120, "simulator")
        roles = ["temporal", "simulator"]
        if config.worker:
            procs.append(_spawn("worker", [*py, "worker", "--temporal-address", address, "--task-queue",
                                           config.task_queue, "--kubeconfig", str(kubeconfig)], logs,
                                config.worker_env))
            roles.append("worker")
        if config.bare_worker:
            procs.append(_spawn("bare-worker", [sys.executable, "-m", "benchmarks.bare", "--address", address], logs))
            roles.append("bare-worker")
        client = await connect(address)
        yield BenchStack(client=client, temporal_address=address, task_queue=config.task_queue,
                         kubeconfig=kubeconfig, sim_url=f"http://127.0.0.1:{sport}", workdir=workdir,
                         pids={name: p.pid for name, p in zip(roles, procs, strict=True)})
