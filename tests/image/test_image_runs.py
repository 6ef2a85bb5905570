"""`make image` end to end: built twice to the same digest, run by podman as uid 10001, and its worker
completes an incident against a `podmedic up` stack that runs no worker of its own.

Needs the Debian tools `make image-tools` installs (mmdebstrap, podman, runc) and root; skipped
without them. Real parts: the Temporal dev server, the simulator over HTTP, the stack's ingest and
node agent; the worker is the image's, on the host network, reading a copy of the stack's kubeconfig.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.e2e_operators.stack import Ops
from tests.image.recipe import ROOT
from workers.stack.up import Stack, StackOptions

pytestmark = pytest.mark.skipif(
    not (shutil.which("mmdebstrap") and shutil.which("podman") and os.geteuid() == 0),
    reason="needs root and the Debian packages mmdebstrap, podman, runc (`make image-tools` installs them)")

BUILD = [sys.executable, str(ROOT / "deploy" / "image" / "build.py")]
VERSION = (ROOT / "podmedic" / "__init__.py").read_text().split('__version__ = "')[1].split('"')[0]
IMAGE = f"docker.io/library/podmedic:{VERSION}"  # the name containerd and podman give it on import


def _build(out: Path) -> dict[str, Any]:
    done = subprocess.run([*BUILD, "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "[5/5] SBOM" in done.stdout  # progress, step by step
    figures: dict[str, Any] = json.loads((out / "image.json").read_text())
    return figures


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _build(tmp_path_factory.mktemp("image"))


class Podman:
    """podman with its own storage under a temporary directory and this project's containers.conf."""

    def __init__(self, root: Path) -> None:
        self.argv = ["podman", "--root", str(root / "storage"), "--runroot", str(root / "run"),
                     "--storage-driver", "vfs"]
        self.env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy" / "image" / "containers.conf")}

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*self.argv, *args], capture_output=True, text=True, timeout=timeout, env=self.env)
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr}"
        return done

    def popen(self, *args: str, log: IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen([*self.argv, *args], stdout=log, stderr=subprocess.STDOUT, env=self.env)


@pytest.fixture(scope="module")
def podman(built: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    engine = Podman(tmp_path_factory.mktemp("podman"))
    loaded = engine("load", "-i", built["archive"])
    assert f"Loaded image: {IMAGE}" in loaded.stdout + loaded.stderr
    yield engine
    subprocess.run([*engine.argv, "system", "reset", "--force"], capture_output=True, env=engine.env, check=False)


def test_two_builds_of_one_commit_have_one_digest(built: dict[str, Any], tmp_path: Path) -> None:
    shutil.copytree(Path(built["archive"]).parent / "wheels", tmp_path / "wheels")  # pinned: no need to fetch again
    again = _build(tmp_path)
    assert again["digest"] == built["digest"], (
        "not reproducible: compare the two builds' debian-packages.tsv, then the layers "
        f"({built['archive']} vs {again['archive']})")
    assert built["layers"] == 1 and built["sbom_components"] > 100


def test_the_image_runs_podmedic_as_uid_10001_with_its_labels(podman: Podman, built: dict[str, Any]) -> None:
    assert podman("run", "--rm", "--network", "host", IMAGE, "--version").stdout.strip() == f"podmedic {VERSION}"
    assert podman("run", "--rm", "--network", "host", "--entrypoint", "id", IMAGE).stdout.startswith(
        "uid=10001(podmedic) gid=10001(podmedic)")
    for role in (["ingest"], ["agent", "nvml"], ["codec-server"]):  # one image for every role the manifests run
        assert "environment (flags win" in podman("run", "--rm", "--network", "host", IMAGE, *role, "--help").stdout
    [inspected] = json.loads(podman("image", "inspect", IMAGE).stdout)
    labels = inspected["Labels"]
    inputs = ["pyproject.toml", "README.md", "podmedic", "workflows", "activities", "workers", "deploy/image",
              "deploy/requirements.lock"]
    last = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%H", "--", *inputs],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert labels["org.opencontainers.image.revision"].removesuffix("-dirty") == last
    assert labels["org.opencontainers.image.version"] == VERSION
    assert inspected["Config"]["Entrypoint"][0] == "/usr/bin/tini"  # PID 1 reaps and forwards SIGTERM


# Short waits, so the incident closes within the test (the embedded policy holds a healed device for minutes).
POLICY = """
guard: {enabled: false}
drivers:
  default:
    checkpoint: {timeout_s: 10, poll_s: 0.3}
    recovery: {verify_poll_s: 0.3}
    close: {heal_wait_s: 5, anti_flap_s: 1, poll_s: 0.5}
"""


def test_the_images_worker_completes_an_incident(podman: Podman, tmp_path: Path) -> None:
    mounted = tmp_path / "mounted"  # what the container reads: world-readable, as it runs as uid 10001
    mounted.mkdir()
    (mounted / "policy.yaml").write_text(POLICY)
    options = StackOptions(state_dir=tmp_path / "stack", policy=mounted / "policy.yaml", nodes=1, devices_per_node=2,
                           worker=False)
    with Stack(options) as stack, (tmp_path / "worker.log").open("wb") as log:
        ep = stack.endpoints
        shutil.copy(str(ep["kubeconfig"]), mounted / "kubeconfig")  # the stack's copy is root's, mode 0600
        for file in mounted.iterdir():
            file.chmod(0o644)
        worker = podman.popen(
            "run", "--rm", "--network", "host", "--name", "podmedic-image-worker", "-v", f"{mounted}:/etc/podmedic:ro",
            "-e", f"PODMEDIC_TICKET_URL={ep['ticket_url']}", IMAGE, "worker",
            "--kubeconfig", "/etc/podmedic/kubeconfig", "--policy", "/etc/podmedic/policy.yaml",
            "--temporal-address", str(ep["temporal_address"]), "--task-queue", str(ep["task_queue"]),
            log=log)
        try:
            ops = Ops(stack, tmp_path / "stack")
            pod = ops.training_pod("train-image")
            driver, pool, device = pod["devices"][0].split("/")
            ops.sim("/sim/v1/faults/device", {"driver": driver, "pool": pool, "device": device,
                                              "health": "Unhealthy", "reason": "XidError", "code": 31,
                                              "message": "XID 31: GPU memory page fault", "clears_on_restart": True})
            done = asyncio.run(ops.wait_phase(f"device/{pod['devices'][0]}", "Closed", timeout=120))
            assert done["outcome"]["outcome"] == "recovered_in_place", done
        finally:
            worker.terminate()  # podman forwards SIGTERM to tini, tini to the worker: a graceful stop
            assert worker.wait(timeout=90) is not None
        log = (tmp_path / "worker.log").read_text()
        assert "Traceback" not in log, log[-3000:]
