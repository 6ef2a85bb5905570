"""podmedic's components speaking to the simulator as their ServiceAccounts, under their deploy/ RBAC.

The simulator authorizes every request by RBAC (podmedic_sim/rbac.py); its own kubeconfig is the
cluster admin. ``as_component`` loads deploy/kustomize/base's ServiceAccounts, roles and bindings into
the simulator through its API (kubectl apply), asks the TokenRequest API for the component's token
and writes a kubeconfig that carries it: a call the component's role does not grant is a 403, as on a
cluster, and fails the end-to-end test that made it.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client, config

from podmedic_sim import SimCluster
from podmedic_sim.kubeconfig import write_kubeconfig
from tests.deploy.conftest import ROOT, kustomize
from tests.helpers import run_kubectl

RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
NAMESPACE = "podmedic"


def load_rbac(sim: SimCluster) -> None:
    """Apply podmedic's ServiceAccounts, roles and bindings to ``sim`` (again: unchanged)."""
    docs = [d for d in yaml.safe_load_all(kustomize(ROOT / "deploy" / "kustomize" / "base"))
            if d and d["kind"] in RBAC_KINDS]
    assert sim.kubeconfig_path is not None
    done = run_kubectl(sim.kubeconfig_path, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    assert done.returncode == 0, f"kubectl apply of deploy/ RBAC failed: {done.stderr}"


def as_component(sim: SimCluster, component: str) -> Path:
    """A kubeconfig of ``sim`` in which ``component`` (worker, ingest, admission) is its ServiceAccount."""
    assert sim.kubeconfig_path is not None
    load_rbac(sim)
    with config.new_client_from_config(str(sim.kubeconfig_path)) as api:
        issued = client.CoreV1Api(api).create_namespaced_service_account_token(
            f"podmedic-{component}", NAMESPACE, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                                  "spec": {"expirationSeconds": 86400}})
    path = Path(sim.kubeconfig_path).with_name(f"{component}.kubeconfig")
    return write_kubeconfig(path, sim.url, token=issued.status.token)
