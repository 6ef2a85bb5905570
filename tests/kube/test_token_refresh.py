"""The client's per-request credential refresh runs once per interval (``podmedic/kube/token_refresh.py``).

Real parts: the kubernetes client's own kubeconfig loader (its ``refresh_api_key_hook`` re-installs
itself each time it runs, as the client ships it), real requests to the simulator's API server.
The pacer counts the hook's runs; nothing is replaced.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from podmedic.kube.gateway import KubeGateway
from podmedic.kube.token_refresh import PacedRefresh
from podmedic_sim import SimCluster, SimConfig


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cluster = SimCluster(SimConfig(nodes=1, devices_per_node=2), api_only=True)
    path = tmp_path_factory.mktemp("refresh") / "kubeconfig"
    cluster.start(kubeconfig_path=path)
    yield path
    cluster.stop()


def test_the_loaders_hook_runs_once_per_interval_and_stays_paced(kubeconfig: Path) -> None:
    kube = KubeGateway(kubeconfig)
    try:
        configuration = kube._api.configuration
        paced = configuration.refresh_api_key_hook
        assert isinstance(paced, PacedRefresh)  # the simulator's kubeconfig carries a token: the loader hooks it
        paced.every_s = 0.5
        before = paced.runs
        for _ in range(20):
            kube.server_version()
        assert paced.runs - before <= 1  # 20 requests within half a second: one refresh at most
        assert configuration.refresh_api_key_hook is paced  # the loader's re-installed copy did not unpace it
        time.sleep(0.6)
        ran = paced.runs
        kube.server_version()
        assert paced.runs == ran + 1  # due again: the loader's hook (its re-installed copy) ran
        assert configuration.api_key.get("BearerToken")  # and the credential is in place
    finally:
        kube.close()


def test_a_paced_configuration_deep_copies(kubeconfig: Path) -> None:
    kube = KubeGateway(kubeconfig)
    try:
        twin = copy.deepcopy(kube._api.configuration)  # the client copies configurations so
        assert isinstance(twin.refresh_api_key_hook, PacedRefresh)
        assert twin.refresh_api_key_hook is not kube._api.configuration.refresh_api_key_hook
    finally:
        kube.close()
