"""A simulator over HTTP for the worker's watch-fed caches (``podmedic/kube/reflector.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from podmedic_sim import SimCluster
from tests.simkit import fast_config, serving, unmodified_client


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """A simulator whose watch history holds 50 changes, so a watch that falls behind is answered 410."""
    cluster = SimCluster(fast_config(nodes=2, devices_per_node=4), history_size=50, bookmark_interval_s=0.1)
    yield from serving(cluster, tmp_path_factory.mktemp("caches") / "kubeconfig")


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    """The unmodified ``kubernetes`` client: the cluster's other writers."""
    yield from unmodified_client(sim)
