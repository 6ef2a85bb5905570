"""``--log-format json``: one JSON object per line, the incident and trace on lines about an incident.

The context comes from where the line is logged: a module logger inside a running activity (the
SDK's ``ActivityEnvironment`` gives a real activity context) carries the activity's workflow id,
which is the incident id; a line inside an OpenTelemetry span carries its trace id.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from temporalio.testing import ActivityEnvironment

from podmedic.telemetry.logs import JsonFormatter
from tests.helpers import UNREACHABLE_KUBECONFIG

INCIDENT = "device/gpu.nvidia.com/node-0001/gpu-3"


def _line(log: logging.Logger, message: str, **extra: object) -> dict[str, object]:
    """What ``log`` writes for one warning, through the JSON formatter, parsed."""
    captured: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(self.format(record))
    handler = Capture()
    handler.setFormatter(JsonFormatter())
    log.addHandler(handler)
    try:
        log.warning(message, extra=extra)
    finally:
        log.removeHandler(handler)
    [line] = captured
    parsed: dict[str, object] = json.loads(line)
    return parsed


async def test_a_line_inside_an_activity_names_the_incident_and_the_trace() -> None:
    log = logging.getLogger("podmedic.test.activity")
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=INCIDENT, workflow_run_id="run-1",
                                   activity_type="taint_device")
    tracer = TracerProvider().get_tracer("test")

    def act() -> dict[str, object]:
        with tracer.start_as_current_span("RunActivity:taint_device") as span:
            line = _line(log, "tainted")
            assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
            return line
    line = env.run(act)
    assert (line["message"], line["level"], line["incident"], line["workflow_id"], line["run_id"],
            line["activity"]) == ("tainted", "WARNING", INCIDENT, INCIDENT, "run-1", "taint_device")


def test_a_line_outside_any_incident_has_no_incident_and_extra_can_name_one() -> None:
    log = logging.getLogger("podmedic.test.plain")
    plain = _line(log, "listening")
    assert "incident" not in plain and "trace_id" not in plain and "workflow_id" not in plain
    assert _line(log, "delivered", incident=INCIDENT)["incident"] == INCIDENT


def test_the_cli_writes_json_lines_on_stderr_only(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text(UNREACHABLE_KUBECONFIG)
    result = subprocess.run([sys.executable, "-m", "workers.cli.main", "--log-format", "json", "worker",
                             "--kubeconfig", str(tmp_path / "kc"), "--temporal-address", "127.0.0.1:9",
                             "--temporal-wait", "1"], capture_output=True, text=True, timeout=60)
    assert result.stdout == "" and result.returncode == 1
    *logged, last = result.stderr.strip().splitlines()
    lines = [json.loads(line) for line in logged]  # every log line is one JSON object
    assert any(x["logger"] == "podmedic.temporal" and x["level"] == "WARNING" and "not reachable" in x["message"]
               for x in lines), lines
    assert last.startswith("podmedic worker: cannot reach Temporal at 127.0.0.1:9")
    bad = subprocess.run([sys.executable, "-m", "workers.cli.main", "--log-format", "xml", "worker"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'xml'" in bad.stderr

