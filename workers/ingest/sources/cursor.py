"""Where a watch left off: one small JSON file per source, so a restart resumes instead of relisting.

The file holds the resourceVersion up to which every observation was delivered, and the
source's memory at that point (for example which devices were unhealthy), so a device that
healed while the ingest was down is still seen changing. It is written atomically (a
temporary file, fsync, rename): a crash leaves the old cursor or the new one, never half of
one. Writes are throttled; a cursor that lags only means replaying a little more, which the
stable event ids make harmless.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("podmedic.ingest.cursor")

FORMAT = 1
Memory = dict[str, Any]


@dataclass
class Saved:
    """What a cursor file held: the resourceVersion and the source's memory at it."""

    resource_version: str
    memory: Memory = field(default_factory=dict)


class Cursor:
    """The persisted position of one source's watch (``None`` path: memory only)."""

    def __init__(self, path: Path | None, *, min_interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._last_write = float("-inf")
        self._pending: tuple[str, Callable[[], Memory]] | None = None
        self.writes = 0

    @classmethod
    def in_dir(cls, state_dir: Path | None, source: str, **kwargs: Any) -> Cursor:
        """The cursor of ``source`` under ``state_dir`` (``watch-<source>.json``)."""
        return cls(None if state_dir is None else Path(state_dir) / f"watch-{source}.json", **kwargs)

    def load(self) -> Saved | None:
        """The saved position, or ``None`` when there is none or it cannot be read (relist)."""
        if self.path is None or not self.path.exists():
            return None
        try:
            data = json.loads(self.path.read_text())
            if data.get("format") != FORMAT or not data.get("resourceVersion"):
                raise ValueError(f"format {data.get('format')!r}, resourceVersion {data.get('resourceVersion')!r}")
            return Saved(str(data["resourceVersion"]), dict(data.get("memory") or {}))
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("cursor %s unusable (%s): relisting", self.path, exc)
            return None

    def advance(self, resource_version: str, memory: Callable[[], Memory]) -> None:
        """Everything up to ``resource_version`` was delivered; save it when the throttle allows.

        ``memory`` is called only when writing, so an idle throttle costs nothing.
        """
        if not resource_version:
            return
        self._pending = (resource_version, memory)
        if self._clock() - self._last_write >= self.min_interval_s:
            self.flush()

    def drop_pending(self) -> None:
        """Forget an unwritten position: the source's memory is about to move away from it
        (a relist), so writing it later with that memory would not be consistent."""
        self._pending = None

    def flush(self) -> None:
        """Write the last advanced position now, with the source's memory as it is now; call
        it only while that memory still matches the position (right after ``advance``)."""
        pending, self._pending = self._pending, None
        if pending is None or self.path is None:
            return
        version, memory = pending
        body = json.dumps({"format": FORMAT, "resourceVersion": version, "memory": memory(),
                           "saved_at": time.time()}, separators=(",", ":"))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._last_write = self._clock()
        self.writes += 1

