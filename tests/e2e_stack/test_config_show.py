"""``podmedic config show`` and each process's ``--help``: the variables, their defaults and values.

Real processes. The variable names expected are the ones the deploy manifests and docs use.
They are written out here, not read from the models under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PODMEDIC = [sys.executable, "-m", "workers.cli.main"]


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PODMEDIC_", "TEMPORAL_", "OTEL_"))}
    return subprocess.run([*PODMEDIC, *args], capture_output=True, text=True, timeout=60, env={**clean, **env})


def test_config_show_prints_values_sources_and_hides_secrets() -> None:
    result = _run("config", "show", "worker", "-o", "json", PODMEDIC_METRICS_PORT="9464",
                  TEMPORAL_ADDRESS="temporal.example:7233", PODMEDIC_TEMPORAL_API_KEY="s3cret",
                  PODMEDIC_TICKET_URL="https://tickets.example/api")
    assert result.returncode == 0, result.stderr
    assert "s3cret" not in result.stdout and "tickets.example" not in result.stdout
    rows = {row["setting"]: row for row in json.loads(result.stdout)}
    assert (rows["metrics_port"]["value"], rows["metrics_port"]["source"]) == (9464, "PODMEDIC_METRICS_PORT")
    assert (rows["temporal_address"]["value"], rows["temporal_address"]["source"]) == (
        "temporal.example:7233", "TEMPORAL_ADDRESS")  # the temporal CLI's variable, podmedic's unset
    assert (rows["shutdown_grace"]["value"], rows["shutdown_grace"]["source"]) == (50.0, "default")
    assert rows["temporal_api_key"]["value"] == "(set)"
    assert rows["PODMEDIC_TICKET_URL"]["value"] == "(set)"  # named by the embedded policy's webhook
    assert rows["PODMEDIC_TICKET_TOKEN"]["value"] is None


def test_config_show_refuses_what_the_process_would_refuse() -> None:
    result = _run("config", "show", "ingest", PODMEDIC_DRY_RUN="perhaps")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("podmedic config show ingest: PODMEDIC_DRY_RUN='perhaps': ")
    worker = _run("worker", PODMEDIC_SHUTDOWN_GRACE_S="fifty")
    assert worker.returncode == 2 and "Traceback" not in worker.stderr
    assert worker.stderr.strip() == ("podmedic worker: refusing to start: PODMEDIC_SHUTDOWN_GRACE_S='fifty': "
                                     "Input should be a valid number, unable to parse string as a number")


@pytest.mark.parametrize(("command", "expected"), [
    (["worker"], ["PODMEDIC_TEMPORAL_ADDRESS, TEMPORAL_ADDRESS  [default: localhost:7233]",
                  "PODMEDIC_SHUTDOWN_GRACE_S  [default: 50]", "PODMEDIC_METRICS_PORT  [default: unset]",
                  "PODMEDIC_DEPLOYMENT_NAME", "PODMEDIC_PAYLOAD_KEY_FILE"]),
    (["ingest"], ["PODMEDIC_DRY_RUN  [default: 0]", "PODMEDIC_INGEST_TOKEN", "PODMEDIC_NAMESPACE, TEMPORAL_NAMESPACE"]),
    (["agent", "nvml"], ["PODMEDIC_INGEST_URL", "PODMEDIC_INGEST_TOKEN_FILE", "NODE_NAME"]),
    (["codec-server"], ["PODMEDIC_PAYLOAD_KEY_FILE  [default: unset]"]),
])
def test_help_lists_each_variable_with_its_default(command: list[str], expected: list[str]) -> None:
    result = _run(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "environment (flags win" in result.stdout
    for text in expected:
        assert text in result.stdout, text
