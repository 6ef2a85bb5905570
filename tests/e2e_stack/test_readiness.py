"""``/readyz`` of the worker and the ingest says whether they can work: not with the API server gone.

Real ``podmedic worker`` and ``podmedic ingest`` processes against the Temporal dev server and the
simulator over HTTP; the simulator is stopped mid-test, as an API server outage would look.
Liveness (``/healthz``) stays 200 throughout: restarting a process brings no API server back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from podmedic_sim import SimCluster
from tests.helpers import served_sim, wait_until
from workers.stack.readiness import free_port

PODMEDIC = [sys.executable, "-m", "workers.cli.main"]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError as err:
        return 0, str(err)


def _answer(url: str, status: int, text: str) -> str | None:
    got, body = _get(url)
    return body if got == status and text in body else None


async def test_readiness_follows_temporal_the_api_server_and_the_watches(dev_env: WorkflowEnvironment,
                                                                          tmp_path: Path) -> None:
    address = dev_env.client.service_client.config.target_host
    worker_port, ingest_port = free_port(), free_port()
    (tmp_path / "token").write_text("t0ken")
    env = {**os.environ, "PODMEDIC_TEMPORAL_ADDRESS": address}
    sim: SimCluster
    with served_sim(tmp_path) as sim:
        kubeconfig = str(sim.kubeconfig_path)
        procs = []
        for role, extra in (("worker", ["--health-listen", f"127.0.0.1:{worker_port}"]),
                            ("ingest", ["--listen", f"127.0.0.1:{ingest_port}",
                                        "--token-file", str(tmp_path / "token")])):
            with open(tmp_path / f"{role}.log", "wb") as log:
                procs.append(subprocess.Popen([*PODMEDIC, role, "--kubeconfig", kubeconfig, "--task-queue", "readyz",
                                               *extra], env=env, stdout=subprocess.DEVNULL, stderr=log))
        try:
            urls = {role: f"http://127.0.0.1:{port}" for role, port in (("worker", worker_port),
                                                                       ("ingest", ingest_port))}
            for role, url in urls.items():
                wait_until(lambda u=url: _answer(f"{u}/readyz", 200, "ready"), timeout=60,
                           what=f"{role} ready ({(tmp_path / f'{role}.log').read_text()[-500:]})")
            sim.stop()  # the API server is gone; Temporal is still there
            for role, url in urls.items():
                body = wait_until(lambda u=url: _answer(f"{u}/readyz", 503, "not ready: api server"), timeout=30,
                                  what=f"{role} not ready without the API server")
                assert "temporal" not in body, body
                assert _get(f"{url}/healthz")[0] == 200  # liveness is not readiness
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
