"""Every PODMEDIC_* variable lives in one typed settings model per process (podmedic.settings).

Proved from outside the models: the source tree is scanned for variable names (a read that bypasses
the models fails here), flags are parsed as the real command line parses them, and the temporal CLI
variables are the ones its docs and ``temporalio.envconfig`` name (TEMPORAL_ADDRESS,
TEMPORAL_NAMESPACE).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from podmedic.domain.policy_file import load_policy
from podmedic.domain.ticket_policy import JiraTicket, ServiceNowTicket, Ticket, ticket_variables
from podmedic.settings import PROCESSES, SettingsError, WorkerSettings
from podmedic.settings.base import variables
from podmedic.temporal.security import TemporalSecurity
from workers.cli.main import parse

ROOT = Path(__file__).resolve().parents[2]
CODE = ("podmedic", "podmedic_sim", "activities", "workers", "workflows")
NAME = re.compile(r"\bPODMEDIC_[A-Z0-9_]*[A-Z0-9]\b")


def _modelled() -> set[str]:
    return {v for model in PROCESSES.values() for field in model.model_fields.values() for v in variables(field)}


def _policy_named() -> set[str]:
    """What the embedded policy names, and each ticket backend's default ``*_env`` (a policy may pick any)."""
    defaults = {str(field.default) for model in (Ticket, JiraTicket, ServiceNowTicket)
                for name, field in model.model_fields.items() if name.endswith("_env")}
    return defaults | {v for driver in load_policy(None).drivers.values() for v in ticket_variables(driver.ticket)}


def test_every_variable_the_code_names_is_in_a_process_model() -> None:
    named: dict[str, str] = {}
    for package in CODE:
        for file in sorted((ROOT / package).rglob("*.py")):
            for name in NAME.findall(file.read_text(encoding="utf-8")):
                named.setdefault(name, str(file.relative_to(ROOT)))
    stray = {n: f for n, f in named.items() if n not in _modelled() | _policy_named() | {"PODMEDIC_TEMPORAL"}}
    assert not stray, f"variables read outside podmedic.settings (add them to a group): {stray}"


def test_only_the_settings_package_reads_podmedic_variables_from_the_environment() -> None:
    reads = re.compile(r"(os\.environ(\.get)?[\[(]|getenv\()\s*[\"']PODMEDIC_")
    offenders = [str(f.relative_to(ROOT)) for package in CODE for f in sorted((ROOT / package).rglob("*.py"))
                 if reads.search(f.read_text(encoding="utf-8"))]
    assert offenders == []


def test_a_flag_beats_its_variable_and_a_variable_beats_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PODMEDIC_TEMPORAL_ADDRESS", "TEMPORAL_ADDRESS", "PODMEDIC_SHUTDOWN_GRACE_S",
                 "PODMEDIC_WORKER_HEALTH_LISTEN"):
        monkeypatch.delenv(name, raising=False)
    args = parse(["worker"])
    assert (args.temporal_address, args.shutdown_grace, args.health_listen) == ("localhost:7233", 50.0, None)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "from-temporal-cli:7233")
    assert parse(["worker"]).temporal_address == "from-temporal-cli:7233"
    monkeypatch.setenv("PODMEDIC_TEMPORAL_ADDRESS", "from-podmedic:7233")
    monkeypatch.setenv("PODMEDIC_SHUTDOWN_GRACE_S", "20")
    monkeypatch.setenv("PODMEDIC_WORKER_HEALTH_LISTEN", "0.0.0.0:8090")
    args = parse(["worker"])
    assert (args.temporal_address, args.shutdown_grace, args.health_listen) == (
        "from-podmedic:7233", 20.0, ("0.0.0.0", 8090))
    args = parse(["worker", "--temporal-address", "flag:7233", "--shutdown-grace", "5"])
    assert (args.temporal_address, args.shutdown_grace) == ("flag:7233", 5.0)


def test_a_command_keeps_its_own_default_unless_the_variable_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODMEDIC_TEMPORAL_WAIT_S", raising=False)
    assert parse(["setup", "temporal"]).temporal_wait == 10.0  # an operator at a terminal waits less
    assert parse(["worker"]).temporal_wait == 60.0
    monkeypatch.setenv("PODMEDIC_TEMPORAL_WAIT_S", "3")
    assert parse(["setup", "temporal"]).temporal_wait == 3.0


def test_bad_values_are_refused_together_naming_each_variable() -> None:
    with pytest.raises(SettingsError) as refused:
        WorkerSettings.load({"PODMEDIC_METRICS_PORT": "http", "PODMEDIC_LOG_FORMAT": "xml",
                             "PODMEDIC_WORKER_HEALTH_LISTEN": "8090", "PODMEDIC_TEMPORAL_API_KEY": "s3cret-key"})
    text = str(refused.value)
    assert "PODMEDIC_METRICS_PORT='http': Input should be a valid integer" in text
    assert "PODMEDIC_LOG_FORMAT='xml': Input should be 'text' or 'json'" in text
    assert "PODMEDIC_WORKER_HEALTH_LISTEN='8090': '8090' is not HOST:PORT" in text
    with pytest.raises(SettingsError, match="PODMEDIC_BUILD_ID is empty"):
        WorkerSettings.load({"PODMEDIC_DEPLOYMENT_NAME": "podmedic"})
    with pytest.raises(SettingsError) as refused:
        WorkerSettings.load({"PODMEDIC_TEMPORAL_API_KEY": "s3cret-key", "PODMEDIC_TEMPORAL_WAIT_S": "-1"})
    assert "s3cret-key" not in str(refused.value)


def test_an_empty_variable_counts_as_unset() -> None:
    settings = WorkerSettings.load({"PODMEDIC_METRICS_PORT": "", "PODMEDIC_TEMPORAL_ADDRESS": "",
                                    "TEMPORAL_ADDRESS": "t:7233"})
    assert settings.metrics_port is None and settings.temporal_address == "t:7233"
    assert settings.source("temporal_address") == "TEMPORAL_ADDRESS"


def test_the_temporal_address_does_not_switch_off_the_temporal_cli_credentials(tmp_path: Path) -> None:
    # Only podmedic's own security variables replace the temporal CLI's (TEMPORAL_API_KEY, temporalio.envconfig).
    env = {"PODMEDIC_TEMPORAL_ADDRESS": "cloud:7233", "TEMPORAL_API_KEY": "cli-key",
           "TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml")}
    assert TemporalSecurity.from_env(env).api_key == "cli-key"
    assert TemporalSecurity.from_env({**env, "PODMEDIC_TEMPORAL_API_KEY": "ours"}).api_key == "ours"
