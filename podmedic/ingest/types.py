"""What sources and the service share: the emit callback, the stop signal, the source shape."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from podmedic.domain.models import ConfigProblem, DeviceHealthEvent, PluginDevice, UnresolvedDevice

Observation = DeviceHealthEvent | ConfigProblem | UnresolvedDevice | PluginDevice

# Blocks until the observation is durably delivered; raises ``Stopping`` when the service stops first.
Emit = Callable[[Observation], None]


class Stopping(Exception):
    """The service is stopping: what was being emitted was not delivered (and not acknowledged)."""


class Source(Protocol):
    """A cluster watch that turns objects into observations, run in its own thread."""

    @property
    def name(self) -> str:
        """Short name, for logs and the cursor file."""

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Watch until ``stop`` is set; call ``emit`` for each observation, in order."""
