"""Remembering what was already delivered, so repeats cost no Temporal round trip."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class RecentStates:
    """The last state delivered per key, forgotten after ``ttl_s`` or when full.

    Forgetting is what keeps dedup safe: an incident that closed and a device that fails
    the same way again an hour later must open a new incident, and the only cost of a
    forgotten entry is one round trip the workflow itself deduplicates.
    """

    def __init__(self, ttl_s: float = 300.0, max_entries: int = 200_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_s < 0 or max_entries < 1:
            raise ValueError("ttl_s must be >= 0 and max_entries >= 1")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[Hashable, float]] = OrderedDict()

    def seen(self, key: str, state: Hashable) -> bool:
        """Whether ``state`` is what was last delivered for ``key``, within the TTL."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        if self._clock() - entry[1] > self.ttl_s:
            del self._entries[key]
            return False
        return entry[0] == state

    def last(self, key: str, within_s: float) -> Hashable | None:
        """The state last delivered for ``key`` if that was less than ``within_s`` ago (and within
        the TTL), or ``None``."""
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry[1] > min(within_s, self.ttl_s):
            return None
        return entry[0]

    def remember(self, key: str, state: Hashable) -> None:
        """Record that ``state`` was delivered for ``key`` now."""
        self._entries[key] = (state, self._clock())
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
