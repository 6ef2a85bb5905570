"""Names of the protocol and the downward-API annotations file (stdlib only).

These annotation names are the protocol's one definition: podmedic's checkpoint and
restart activities and the simulated trainer read them from here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

METHOD = "podmedic.io/checkpoint-method"
REQUEST = "podmedic.io/checkpoint-request"
ACK = "podmedic.io/checkpoint-ack"
CHECKPOINT_ID = "podmedic.io/checkpoint-id"
LOCATION = "podmedic.io/checkpoint-location"
ERROR = "podmedic.io/checkpoint-error"
RESTART_REQUEST = "podmedic.io/restart-request"
RESTART_EXIT_CODE = "podmedic.io/restart-exit-code"
PORT = "podmedic.io/checkpoint-port"  # method http: where the trainer listens
PATH = "podmedic.io/checkpoint-path"
DEFAULT_PORT = 8471
DEFAULT_PATH = "/podmedic/checkpoint"
PROGRESS = "podmedic.io/progress"  # the step each running pod reached: what "progressing" is verified on
REPORTS_PROGRESS = "podmedic.io/reports-progress"  # "true": the workload writes PROGRESS

Save = Callable[[str], tuple[str, str]]
"""The workload's own save: ``save(request_id) -> (checkpoint_id, location)``; raise to report a failure."""


def parse_annotations(text: str) -> dict[str, str]:
    """Parse a downward-API annotations file: one ``key="value"`` per line, values Go-quoted.

    Raises:
        ValueError: a line that is not ``key="value"``, naming the line number.
    """
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, quoted = line.partition("=")
        if not sep or not key or not quoted.startswith('"') or not quoted.endswith('"'):
            raise ValueError(f"annotations line {number}: expected key=\"value\", got {line[:80]!r}")
        try:
            value = ast.literal_eval(quoted)
        except (ValueError, SyntaxError) as err:
            raise ValueError(f"annotations line {number}: bad quoted value: {err}") from err
        found[key] = str(value)
    return found


def read_annotations(path: str | Path = "/etc/podinfo/annotations") -> dict[str, str]:
    """The pod's annotations from its downward-API volume (empty if the file is not there yet)."""
    try:
        return parse_annotations(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
