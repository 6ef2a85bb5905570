"""The in-place restart convention: exit with the pod's restart exit code (KEP-5307 rules)."""

from __future__ import annotations

import sys
from typing import NoReturn

from podmedic.workload.protocol import RESTART_EXIT_CODE, RESTART_REQUEST

DEFAULT_RESTART_EXIT_CODE = 85


def restart_exit_code(annotations: dict[str, str]) -> int:
    """The code the container's ``restartPolicyRules`` restart on (``podmedic.io/restart-exit-code``, default 85).

    Raises:
        ValueError: the annotation is not an exit code 1-255.
    """
    raw = annotations.get(RESTART_EXIT_CODE, str(DEFAULT_RESTART_EXIT_CODE)).strip()
    if not raw.isdigit() or not 1 <= int(raw) <= 255:
        raise ValueError(f"{RESTART_EXIT_CODE}: {raw!r} is not an exit code 1-255")
    return int(raw)


def restart_requested(annotations: dict[str, str], handled: str | None = None) -> str | None:
    """The restart request id to act on, or ``None`` (none, or ``handled`` already)."""
    request = annotations.get(RESTART_REQUEST) or None
    return request if request != handled else None


def exit_for_restart(annotations: dict[str, str]) -> NoReturn:
    """Exit so the kubelet restarts the container in place (pod UID and devices kept)."""
    sys.exit(restart_exit_code(annotations))
