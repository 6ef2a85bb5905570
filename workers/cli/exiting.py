"""Leaving a command that used a Temporal client, without the interpreter's teardown."""

from __future__ import annotations

import logging
import os
import sys

from podmedic.settings.groups import Development


def exit_now(code: int) -> int:
    """End the process with ``code`` now.

    The Temporal client's Rust threads can outlive the event loop and abort CPython's
    finalization ("PyGILState_Release ... must be current", temporalio/sdk-python#300),
    which would turn a finished command into exit 134. ``PODMEDIC_NO_HARD_EXIT`` (tests that
    call a command in-process) returns the code instead.
    """
    if Development.load().no_hard_exit:
        return code
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
