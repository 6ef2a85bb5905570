"""How the gateway sets up the unmodified ``kubernetes`` client.

The client's shape is its own (kubernetes/client/configuration.py: a ``host`` written while the
proxy came from the environment calls ``urllib.request.getproxies()`` again; kubernetes/config/
kube_config.py: the loader's ``refresh_api_key_hook`` runs before every request and writes ``host``).
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import configuration

from podmedic.kube.errors import KubeConfigError, ServerError
from podmedic.kube.gateway import KubeGateway
from tests.helpers import UNREACHABLE_KUBECONFIG


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig with a token user, whose API server never answers."""
    path = tmp_path / "kubeconfig"
    path.write_text(UNREACHABLE_KUBECONFIG)
    return path


def test_the_environments_proxy_is_honoured(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    gateway = KubeGateway(kubeconfig, qps=0, burst=1)
    try:
        assert gateway._api.configuration.proxy == "http://proxy.example:3128"
    finally:
        gateway.close()


def test_a_request_does_not_read_the_environment_again(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = KubeGateway(kubeconfig, qps=0, burst=1, timeout_s=0.5)
    lookups: list[int] = []

    def counted_getproxies() -> dict[str, str]:
        lookups.append(1)
        return urllib.request.getproxies()

    monkeypatch.setattr(configuration, "getproxies", counted_getproxies)
    settings = gateway._api.configuration
    hook, runs = settings.refresh_api_key_hook, []

    def counted_hook(config: Any) -> None:
        runs.append(1)
        hook(config)

    settings.refresh_api_key_hook = counted_hook
    try:
        with pytest.raises(ServerError):  # nothing listens on port 1: the request is still made
            gateway.server_version()
    finally:
        gateway.close()
    assert runs and gateway.limiter.taken > 0  # the loader's hook ran before the requests ...
    assert lookups == []  # ... and did not walk the environment


def test_kubeconfig_from_the_environment_is_named_and_merged(kubeconfig: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl's rules for ``$KUBECONFIG`` (k8s.io/client-go/tools/clientcmd loader.go: a list joined by the
    path separator, merged in order, missing files skipped): a missing file alone is an error that names it;
    beside an existing one it is skipped."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = tmp_path / "nowhere" / "config"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    with pytest.raises(KubeConfigError) as err:
        KubeGateway(None, qps=0, burst=1)
    assert f"KUBECONFIG={missing}; no such file: {missing} (none of them exists)" in str(err.value), err.value

    monkeypatch.setenv("KUBECONFIG", f"{missing}:{kubeconfig}")
    gateway = KubeGateway(None, qps=0, burst=1)
    try:
        assert gateway._api.configuration.host == "http://127.0.0.1:1"
    finally:
        gateway.close()
