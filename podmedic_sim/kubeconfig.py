"""The kubeconfig the simulator writes for the unmodified ``kubernetes`` client."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

CONTEXT = "podmedic-sim"
TOKEN = "podmedic-sim-token"


def kubeconfig(server: str, name: str = CONTEXT, token: str = TOKEN, ca_pem: bytes | None = None) -> dict[str, object]:
    """A kubeconfig with one cluster (trusting ``ca_pem`` when served over TLS), one token user and a current
    context."""
    cluster: dict[str, object] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
        ],
        "current-context": name,
    }


def write_kubeconfig(path: Path, server: str, name: str = CONTEXT, *, token: str = TOKEN,
                     ca_pem: bytes | None = None) -> Path:
    """Write the kubeconfig (mode 0600, parents created) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(server, name, token, ca_pem), sort_keys=False))
    path.chmod(0o600)
    return path
