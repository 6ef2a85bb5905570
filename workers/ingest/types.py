"""What sources and the service share: the emit callback, the stop signal, the source shape."""

from __future__ import annotations

import threading
from typing import Protocol

from podmedic.domain.maintenance import MaintenanceNotice
from podmedic.domain.models import ConfigProblem, DeviceHealthEvent, PluginDevice, UnresolvedDevice
from podmedic.domain.stall import WorkloadStall

Observation = DeviceHealthEvent | ConfigProblem | UnresolvedDevice | PluginDevice | WorkloadStall | MaintenanceNotice



class Emit(Protocol):
    """Blocks until the observation is durably delivered; raises ``Stopping`` when the service stops first.

    ``listed``: the observation comes from a list, not a watch event (a first start, a relist after
    410 Gone, a new leader): the source cannot tell whether it delivered this state before.
    """

    def __call__(self, obs: Observation, *, listed: bool = False) -> None: ...


class Stopping(Exception):
    """The service is stopping: what was being emitted was not delivered (and not acknowledged)."""


class Source(Protocol):
    """A cluster watch that turns objects into observations, run in its own thread."""

    @property
    def name(self) -> str:
        """Short name, for logs and the cursor file."""

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Watch until ``stop`` is set; call ``emit`` for each observation, in order."""
