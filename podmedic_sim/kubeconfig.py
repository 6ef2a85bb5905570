"""The kubeconfig the simulator writes for the unmodified ``kubernetes`` client."""

from __future__ import annotations

from pathlib import Path

import yaml

CONTEXT = "podmedic-sim"
TOKEN = "podmedic-sim-token"


def kubeconfig(server: str, name: str = CONTEXT, token: str = TOKEN) -> dict[str, object]:
    """A kubeconfig with one cluster, one token user and a current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
        ],
        "current-context": name,
    }


def write_kubeconfig(path: Path, server: str, name: str = CONTEXT) -> Path:
    """Write the kubeconfig (mode 0600, parents created) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(server, name), sort_keys=False))
    path.chmod(0o600)
    return path
