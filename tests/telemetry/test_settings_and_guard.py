"""Telemetry settings (flags over environment, errors naming the field) and the guard-state hook."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from podmedic.telemetry import TelemetryError, TelemetrySettings, install, load_telemetry_settings, set_guard_state
from podmedic.telemetry.process import start_telemetry
from workers.cli.main import main, parse


def test_defaults_turn_everything_off() -> None:
    settings = load_telemetry_settings("worker", env={})
    assert settings.service_name == "podmedic-worker"
    assert not settings.metrics_enabled and not settings.tracing_enabled


def test_environment_then_flags() -> None:
    env = {"PODMEDIC_METRICS_PORT": "9464", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
           "PODMEDIC_TRACE_SAMPLING_RATIO": "0.25", "OTEL_SERVICE_NAME": "pm"}
    settings = load_telemetry_settings("ingest", env=env, prometheus_port=9000, sampling_ratio=None)
    assert (settings.prometheus_port, settings.otlp_endpoint, settings.sampling_ratio, settings.service_name) == (
        9000, "http://collector:4318", 0.25, "pm")
    assert settings.metrics_enabled and settings.tracing_enabled


def test_bad_values_name_the_field_flag_and_variable() -> None:
    with pytest.raises(TelemetryError) as err:
        load_telemetry_settings("worker", env={"PODMEDIC_METRICS_PORT": "http", "OTEL_EXPORTER_OTLP_ENDPOINT": "x:1",
                                               "PODMEDIC_TRACE_SAMPLING_RATIO": "2"})
    text = str(err.value)  # a bad variable is named with its value, all of them at once
    assert "PODMEDIC_METRICS_PORT='http': Input should be a valid integer" in text
    assert "OTEL_EXPORTER_OTLP_ENDPOINT='x:1'" in text and "http(s)://" in text
    assert "PODMEDIC_TRACE_SAMPLING_RATIO='2': Input should be less than or equal to 1" in text
    with pytest.raises(TelemetryError) as err:  # a bad flag is named by its flag
        load_telemetry_settings("worker", env={}, prometheus_port=70000, otlp_endpoint="x:1")
    text = str(err.value)
    assert "prometheus_port (--metrics-port): Input should be less than or equal to 65535" in text
    assert "otlp_endpoint (--otlp-endpoint)" in text and "http(s)://" in text


def test_the_worker_refuses_a_bad_setting(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PODMEDIC_TRACE_SAMPLING_RATIO", "-1")
    assert main(["worker"]) == 2  # refused before anything connects
    assert capsys.readouterr().err == ("podmedic worker: refusing to start: PODMEDIC_TRACE_SAMPLING_RATIO='-1': "
                                       "Input should be greater than or equal to 0\n")
    monkeypatch.delenv("PODMEDIC_TRACE_SAMPLING_RATIO")
    with pytest.raises(SystemExit) as stop:
        start_telemetry(parse(["worker", "--trace-sampling-ratio", "2"]), "worker")
    assert stop.value.code == 2
    assert "sampling_ratio (--trace-sampling-ratio): Input should be less than" in capsys.readouterr().err


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    telemetry = install(TelemetrySettings(), metric_readers=[found])
    yield found
    telemetry.shutdown()


def _guard(reader: InMemoryMetricReader) -> dict[tuple[str, str], float]:
    data = reader.get_metrics_data()
    assert data is not None
    found = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name.startswith("podmedic_guard"):
                    for p in metric.data.data_points:
                        found[(metric.name, str(p.attributes.get("state", "")))] = p.value
    return found


def test_guard_state_gauge(reader: InMemoryMetricReader) -> None:
    set_guard_state("ok", devices_tainted=3, nodes_disrupted=1)
    set_guard_state("tripped", devices_tainted=12)
    assert _guard(reader) == {("podmedic_guard_state", "ok"): 0, ("podmedic_guard_state", "tripped"): 1,
                              ("podmedic_guard_devices_tainted", ""): 12, ("podmedic_guard_nodes_disrupted", ""): 1}


def test_guard_state_without_telemetry_is_a_no_op() -> None:
    set_guard_state("tripped", devices_tainted=1)  # nothing installed: must not raise
