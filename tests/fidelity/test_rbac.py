"""Who may do what, as a cluster decides it: ServiceAccount tokens and RBAC, with kubectl as the referee.

Sources: kubernetes/kubernetes ``pkg/registry/core/serviceaccount/storage/token.go`` (TokenRequest,
``kubectl create token``), ``plugin/pkg/auth/authorizer/rbac/rbac.go`` (ClusterRoleBindings and the
namespace's RoleBindings, rules by verb, group, resource[/subresource]), k8s.io/apiserver
``pkg/endpoints/handlers/responsewriters/errors.go`` (the Forbidden message) and
``pkg/registry/authorization/selfsubjectaccessreview`` (``kubectl auth can-i``). The simulator serves
TLS here because kubectl sends a bearer token only over TLS (client-go ``clientcmd``). The roles are
podmedic's own, rendered from deploy/kustomize/base.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from podmedic_sim import SimCluster, SimConfig
from tests.enforced import load_rbac
from tests.helpers import run_kubectl


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A TLS simulator holding podmedic's ServiceAccounts, roles and bindings; its admin kubeconfig."""
    cluster = SimCluster(SimConfig(nodes=2, devices_per_node=2))
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("rbac") / "kubeconfig", tls=True)
    try:
        load_rbac(cluster)  # kubectl sends no credentials over this TLS before a token: the admin applies
        yield Path(str(cluster.kubeconfig_path))
    finally:
        cluster.stop()


def _kubectl(kubeconfig: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = run_kubectl(kubeconfig, *args)
    if ok:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done


def _token(kubeconfig: Path, account: str) -> str:
    return _kubectl(kubeconfig, "create", "token", account, "-n", "podmedic").stdout.strip()


def test_a_service_account_token_is_that_account(secured: Path) -> None:
    token = _token(secured, "podmedic-worker")
    who = _kubectl(secured, f"--token={token}", "auth", "whoami").stdout
    assert "system:serviceaccount:podmedic:podmedic-worker" in who and "system:authenticated" in who
    refused = _kubectl(secured, "--token=not-a-token", "get", "pods", ok=False)
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr


def test_the_worker_may_do_what_its_cluster_role_grants_and_nothing_else(secured: Path) -> None:
    token = f"--token={_token(secured, 'podmedic-worker')}"

    def can(*check: str) -> str:
        return _kubectl(secured, token, "auth", "can-i", *check, ok=False).stdout.strip()

    assert can("list", "pods", "-A") == "yes" and can("create", "pods/eviction", "-n", "default") == "yes"
    assert can("get", "pods", "--subresource=exec", "-n", "default") == "yes"
    assert can("delete", "nodes") == "no" and can("list", "deviceclasses") == "no"
    refused = _kubectl(secured, token, "get", "deviceclasses", ok=False)
    assert ('deviceclasses.resource.k8s.io is forbidden: User "system:serviceaccount:podmedic:podmedic-worker" '
            'cannot list resource "deviceclasses" in API group "resource.k8s.io" at the cluster scope'
            ) in refused.stderr
    assert _kubectl(secured, token, "get", "pods", "-A").returncode == 0


def test_a_namespaced_role_grants_only_in_its_namespace(secured: Path) -> None:
    token = f"--token={_token(secured, 'podmedic-ingest')}"
    leases = [_kubectl(secured, token, "auth", "can-i", "update", "leases", "-n", ns, ok=False).stdout.strip()
              for ns in ("podmedic", "default")]
    assert leases == ["yes", "no"]
