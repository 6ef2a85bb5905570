"""Tests against a real cluster (deploy/kind/e2e.sh): marked ``e2e``, skipped without ``PODMEDIC_E2E_KUBECONFIG``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

ENV = "PODMEDIC_E2E_KUBECONFIG"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every e2e test when no cluster is named."""
    if os.environ.get(ENV):
        return
    skip = pytest.mark.skip(reason=f"{ENV} names no cluster (deploy/kind/e2e.sh sets it)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    """An ApiClient for the cluster named by ``PODMEDIC_E2E_KUBECONFIG``."""
    api_client = config.new_client_from_config(config_file=os.environ[ENV])
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def core(api: Any) -> Any:
    """CoreV1Api of the e2e cluster."""
    return client.CoreV1Api(api)
