"""Log lines as JSON (``--log-format json``): one object per line, with the incident on every line about one.

A line logged while an activity runs carries its workflow id (the incident id: ``device/...``,
``node/...``), run id and activity type, read from the activity's context, so a module logger
inside an activity needs no extra arguments; a line from workflow code carries what the SDK's
workflow logger attaches (``temporal_workflow``); any line inside a traced span carries its
OpenTelemetry trace id, the id that joins the ingest's delivery, the workflow and its activities
in the tracing backend. ``extra={"incident": ...}`` names the incident where no context does.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from opentelemetry import trace
from temporalio import activity

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def _activity_context() -> dict[str, Any]:
    try:
        info = activity.info()
    except RuntimeError:  # not inside an activity
        return {}
    return {"workflow_id": info.workflow_id, "run_id": info.workflow_run_id,
            "activity": info.activity_type, "attempt": info.attempt}


def _workflow_context(record: logging.LogRecord) -> dict[str, Any]:
    extra = getattr(record, "temporal_workflow", None)
    if not isinstance(extra, dict):
        return {}
    return {"workflow_id": extra.get("workflow_id"), "run_id": extra.get("run_id"),
            "workflow_type": extra.get("workflow_type")}


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...context}`` per record."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        line.update(_workflow_context(record) or _activity_context())
        incident = getattr(record, "incident", None) or line.get("workflow_id")
        if isinstance(incident, str) and incident.startswith(("device/", "node/", "config/", "fleet/")):
            line["incident"] = incident
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = format(span.trace_id, "032x")
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: int, log_format: str) -> None:
    """The root logger for a ``podmedic`` command: ``text`` (the default) or ``json`` lines on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
