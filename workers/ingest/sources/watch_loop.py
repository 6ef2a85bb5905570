"""One watch loop for every cluster source: list, watch with bookmarks, relist on 410, resume.

A source only says what an object's change means (``change``); the loop does the rest:
list, then watch from the list's resourceVersion; relist on 410 Gone; back off and retry
on any other error; and after a restart resume from the persisted cursor (relisting if
that resume is answered 410).

Delivery contract: ``emit(obs)`` returns only once the observation is durably delivered
(it raises when the service is stopping). A change's new memory is applied, and the cursor
advanced past its object, only after every ``emit`` for that object returned, so a crash
at any point replays what was not delivered and never skips it.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from podmedic.domain.base import Obj
from podmedic.kube.gateway import KubeError, KubeGateway
from workers.ingest.sources.cursor import Cursor, Memory
from workers.ingest.types import Emit, Observation, Stopping

log = logging.getLogger("podmedic.ingest.watch")

__all__ = ["Change", "ClusterSource", "Emit", "Obj", "Observation", "WatchLoop", "WatchStats"]


def _nothing() -> None:
    return None


@dataclass
class Change:
    """What one object's change means: observations to deliver, then memory to apply."""

    observations: list[Observation] = field(default_factory=list)
    apply: Callable[[], None] = _nothing


@dataclass
class WatchStats:
    """What a loop did, for logs and tests."""

    lists: int = 0
    watches: int = 0
    gone: int = 0
    errors: int = 0
    observations: int = 0
    resumed_from: str | None = None


class ClusterSource(ABC):
    """A source watching one kind of object; ``run(emit, stop)`` runs it in a thread.

    Subclasses set ``name`` (the cursor's file name), ``kind`` and optionally
    ``field_selector``, and implement ``change``; sources that remember state between
    objects also implement ``missing``, ``memory`` and ``restore``.
    """

    name: ClassVar[str]
    kind: ClassVar[str]
    field_selector: ClassVar[str | None] = None

    def __init__(self, kube: KubeGateway, *, state_dir: Path | None = None, watch_timeout_s: int = 30,
                 cursor_interval_s: float = 1.0, backoff_s: tuple[float, float] = (1.0, 30.0)) -> None:
        self.kube = kube
        self.cursor = Cursor.in_dir(state_dir, self.name, min_interval_s=cursor_interval_s)
        self.watch_timeout_s = watch_timeout_s
        self.backoff_s = backoff_s
        self.stats = WatchStats()
        self.restore({})

    @abstractmethod
    def change(self, kind: str, obj: Obj) -> Change:
        """What ``obj`` changing (``ADDED``, ``MODIFIED``, ``DELETED``) means. Must not change
        the source's memory itself: the loop calls ``Change.apply`` once delivered."""

    def missing(self, listed: list[Obj]) -> Change:
        """After a relist: what it means that remembered objects are not in ``listed``."""
        return Change()

    def memory(self) -> Memory:
        """What the source remembers, as JSON, saved with the cursor."""
        return {}

    def restore(self, memory: Memory) -> None:
        """Take back the memory saved with the cursor being resumed from (``{}``: start empty)."""
        return None

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Watch and emit until ``stop`` is set."""
        WatchLoop(self, emit, stop).run()


class _Stopped(Exception):
    pass


class WatchLoop:
    """Runs one ``ClusterSource``: list/watch/relist/resume with a persisted cursor."""

    def __init__(self, source: ClusterSource, emit: Emit, stop: threading.Event) -> None:
        self.source = source
        self.kube = source.kube
        self.cursor = source.cursor
        self.emit = emit
        self.stop = stop
        self.stats = source.stats
        self.version: str | None = None
        self._consistent = True

    def run(self) -> None:
        """Resume or list, then watch, until ``stop``; never raises for cluster errors."""
        saved = self.cursor.load()
        if saved is not None:
            self.source.restore(saved.memory)
            self.version = self.stats.resumed_from = saved.resource_version
            log.info("%s: resuming from resourceVersion %s", self.source.name, self.version)
        delay = self.source.backoff_s[0]
        try:
            while not self.stop.is_set():
                try:
                    if self.version is None:
                        self._relist()
                    self._watch()
                    delay = self.source.backoff_s[0]
                except (_Stopped, Stopping):
                    return
                except KubeError as exc:
                    if exc.status == 410:
                        self.stats.gone += 1
                        log.info("%s: resourceVersion %s expired (410 Gone): relisting", self.source.name,
                                 self.version)
                        self.version = None
                        continue
                    delay = self._back_off(exc, delay)
                except Exception as exc:  # a failed emit or a bad object must not end the watch
                    if self.stop.is_set():
                        return
                    delay = self._back_off(exc, delay)
        finally:
            if self._consistent:
                self._flush()

    def _back_off(self, exc: Exception, delay: float) -> float:
        self.stats.errors += 1
        log.warning("%s: %s; retrying in %.3gs", self.source.name, exc, delay)
        self.stop.wait(delay)
        return min(delay * 2, self.source.backoff_s[1])

    def _deliver(self, change: Change, *, listed: bool = False) -> None:
        for obs in change.observations:
            if self.stop.is_set():
                raise _Stopped
            self.emit(obs, listed=listed)
            self.stats.observations += 1
        if self.stop.is_set():
            # A stopped loop changes nothing more: a deposed leader's thread can linger in its watch while
            # the next term's thread runs the same source.
            raise _Stopped
        change.apply()

    def _relist(self) -> None:
        # From here until the list is done, memory moves ahead of any saved position.
        self._consistent = False
        self.cursor.drop_pending()
        items, version = self.kube.list_objects(self.source.kind, field_selector=self.source.field_selector)
        self.stats.lists += 1
        for obj in items:
            self._deliver(self.source.change("ADDED", obj), listed=True)
        self._deliver(self.source.missing(items), listed=True)
        self.version = version
        self._consistent = True
        self._advance()

    def _watch(self) -> None:
        self.stats.watches += 1
        events = self.kube.watch_objects(self.source.kind, self.version, timeout_s=self.source.watch_timeout_s,
                                         field_selector=self.source.field_selector)
        for kind, obj in events:
            delivered = False
            if kind != "BOOKMARK":
                change = self.source.change(kind, obj)
                self._deliver(change)
                delivered = bool(change.observations)
            self.version = str((obj.get("metadata") or {}).get("resourceVersion") or self.version)
            self._advance()
            if delivered:
                # Past a delivered observation the position is saved at once, not when the throttle
                # next allows: a crash would otherwise replay it after its incident closed, and the
                # stale event would open a second incident for a repaired device (bench faults).
                self._flush()
            if self.stop.is_set():
                raise _Stopped

    def _advance(self) -> None:
        if self.version:
            try:
                self.cursor.advance(self.version, self.source.memory)
            except OSError as exc:
                log.warning("%s: cannot save the cursor (%s); a restart will replay more", self.source.name, exc)

    def _flush(self) -> None:
        try:
            self.cursor.flush()
        except OSError as exc:
            log.warning("%s: cannot save the cursor (%s)", self.source.name, exc)
