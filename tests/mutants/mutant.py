"""One mutant: a deliberate bug, and the tests that must fail because of it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    """One bug: ``old`` (found exactly once in ``path``) replaced by ``new``; ``tests`` must then fail."""

    name: str
    claim: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
